package bot

import (
	"encoding/json"
	"fmt"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// parseEnvelope decodes a frame as slack-go's Socket Mode client does (socketmode.Request, then
// the payload by type) into the event the loop handles.
func parseEnvelope(frame []byte) (socketmode.Event, error) {
	var req socketmode.Request
	if err := json.Unmarshal(frame, &req); err != nil {
		return socketmode.Event{}, err
	}
	evt := socketmode.Event{Type: socketmode.EventType(req.Type), Request: &req}
	switch req.Type {
	case socketmode.RequestTypeEventsAPI:
		e, err := slackevents.ParseEvent(req.Payload, slackevents.OptionNoVerifyToken())
		if err != nil {
			return evt, fmt.Errorf("events_api payload: %w", err)
		}
		evt.Data = e
	case socketmode.RequestTypeSlashCommands:
		var cmd slack.SlashCommand
		if err := json.Unmarshal(req.Payload, &cmd); err != nil {
			return evt, fmt.Errorf("slash command payload: %w", err)
		}
		evt.Data = cmd
	case socketmode.RequestTypeInteractive:
		var cb slack.InteractionCallback
		if err := json.Unmarshal(req.Payload, &cb); err != nil {
			return evt, fmt.Errorf("interactive payload: %w", err)
		}
		evt.Data = cb
	default:
		return evt, fmt.Errorf("envelope type %q not handled", req.Type)
	}
	return evt, nil
}
