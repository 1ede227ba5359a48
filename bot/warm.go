package bot

import (
	"encoding/json"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// Sample envelopes of every kind the bot handles, decoded once at start (warmDecoders).
const (
	sampleMention = `{"envelope_id":"warm","type":"events_api","accepts_response_payload":false,"retry_attempt":0,"payload":{"token":"x","team_id":"T0","api_app_id":"A0","type":"event_callback","event_id":"Ev0","event_time":1,"authorizations":[{"team_id":"T0","user_id":"U0","is_bot":true}],"event":{"type":"app_mention","user":"U1","text":"<@U0> hi","ts":"1.000001","thread_ts":"1.000001","channel":"C0","event_ts":"1.000001","team":"T0","files":[{"id":"F0","name":"a.png","mimetype":"image/png"}],"blocks":[{"type":"rich_text","block_id":"b","elements":[{"type":"rich_text_section","elements":[{"type":"user","user_id":"U0"},{"type":"text","text":" hi"}]}]}]}}}`
	sampleMessage = `{"envelope_id":"warm","type":"events_api","payload":{"team_id":"T0","api_app_id":"A0","type":"event_callback","event_id":"Ev1","event_time":1,"event":{"type":"message","channel_type":"im","user":"U1","text":"hi","ts":"1.000002","channel":"D0","event_ts":"1.000002","blocks":[{"type":"rich_text","block_id":"b","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"hi"}]}]}]}}}`
	sampleCommand = `{"envelope_id":"warm","type":"slash_commands","accepts_response_payload":true,"payload":{"token":"x","team_id":"T0","channel_id":"C0","user_id":"U1","command":"/imagine","text":"a cat","response_url":"https://hooks.slack.com/commands/x","trigger_id":"t"}}`
	sampleClick   = `{"envelope_id":"warm","type":"interactive","accepts_response_payload":false,"payload":{"type":"block_actions","user":{"id":"U1","name":"a"},"team":{"id":"T0"},"channel":{"id":"C0"},"container":{"type":"message","message_ts":"1.000003","channel_id":"C0"},"message":{"type":"message","ts":"1.000003","text":"x","blocks":[{"type":"actions","block_id":"b","elements":[{"type":"button","action_id":"stop","text":{"type":"plain_text","text":"Stop"},"value":"v"}]}]},"actions":[{"type":"button","action_id":"stop","block_id":"b","value":"v","action_ts":"1.1"}],"response_url":"https://hooks.slack.com/actions/x","trigger_id":"t"}}`
	// sampleReply is a thread message as chat.postMessage, chat.update and conversations.replies
	// return it; sampleUser a users.info user.
	sampleReply = `{"type":"message","user":"U0","bot_id":"B0","text":"hi","ts":"1.000004","thread_ts":"1.000001","metadata":{"event_type":"llmbot_message","event_payload":{"kind":"answer"}},"blocks":[{"type":"section","block_id":"b","text":{"type":"mrkdwn","text":"hi"}},{"type":"actions","block_id":"a","elements":[{"type":"button","action_id":"stop","text":{"type":"plain_text","text":"Stop"},"value":"v"}]}],"files":[{"id":"F0","name":"a.png"}]}`
	sampleUser  = `{"id":"U1","team_id":"T0","name":"a","real_name":"A","profile":{"display_name":"A","real_name":"A","image_48":"x"}}`
)

// warmDecoders decodes one sample envelope of every kind as the loop does (and the Web API types
// the first replies decode), and returns how long that took. encoding/json builds a type's decoder
// by reflection the first time it meets the type, which for slack-go's large message and event
// types takes milliseconds (2.9 ms for the first app_mention, 35 µs for the next); done here,
// before the socket connects, that cost is not paid by the first envelopes after a start or
// deploy: the socket acks them before decoding, but the loop decodes them (and acks a slash
// command only then) one after the other, so a burst would queue behind it.
func warmDecoders() time.Duration {
	start := time.Now()
	for _, env := range []string{sampleMention, sampleMessage, sampleCommand, sampleClick} {
		_, _ = decodeSample(env)
	}
	var msg slack.Message
	_ = json.Unmarshal([]byte(sampleReply), &msg)
	var user slack.User
	_ = json.Unmarshal([]byte(sampleUser), &user)
	return time.Since(start)
}

// decodeSample decodes an envelope as the loop does and encodes an ack with a payload, as the
// loop does for a slash command; it returns the decoded payload.
func decodeSample(env string) (any, error) {
	evt, err := parseEnvelope([]byte(env))
	if err != nil {
		return nil, err
	}
	if _, err := json.Marshal(socketmode.Response{EnvelopeID: evt.Request.EnvelopeID, Payload: map[string]any{"text": "x"}}); err != nil {
		return nil, err
	}
	return evt.Data, nil
}
