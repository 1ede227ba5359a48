package slacksocket

import (
	"encoding/json"
	"strings"
	"testing"
)

// Envelopes as Slack sends them, to start the fuzzing from.
const (
	sampleMention = `{"envelope_id":"warm","type":"events_api","accepts_response_payload":false,"retry_attempt":0,"payload":{"token":"x","team_id":"T0","api_app_id":"A0","type":"event_callback","event_id":"Ev0","event_time":1,"authorizations":[{"team_id":"T0","user_id":"U0","is_bot":true}],"event":{"type":"app_mention","user":"U1","text":"<@U0> hi","ts":"1.000001","thread_ts":"1.000001","channel":"C0","event_ts":"1.000001","team":"T0","files":[{"id":"F0","name":"a.png","mimetype":"image/png"}],"blocks":[{"type":"rich_text","block_id":"b","elements":[{"type":"rich_text_section","elements":[{"type":"user","user_id":"U0"},{"type":"text","text":" hi"}]}]}]}}}`
	sampleCommand = `{"envelope_id":"warm","type":"slash_commands","accepts_response_payload":true,"payload":{"token":"x","team_id":"T0","channel_id":"C0","user_id":"U1","command":"/imagine","text":"a cat","response_url":"https://hooks.slack.com/commands/x","trigger_id":"t"}}`
	sampleClick   = `{"envelope_id":"warm","type":"interactive","accepts_response_payload":false,"payload":{"type":"block_actions","user":{"id":"U1","name":"a"},"team":{"id":"T0"},"channel":{"id":"C0"},"container":{"type":"message","message_ts":"1.000003","channel_id":"C0"},"message":{"type":"message","ts":"1.000003","text":"x","blocks":[{"type":"actions","block_id":"b","elements":[{"type":"button","action_id":"stop","text":{"type":"plain_text","text":"Stop"},"value":"v"}]}]},"actions":[{"type":"button","action_id":"stop","block_id":"b","value":"v","action_ts":"1.1"}],"response_url":"https://hooks.slack.com/actions/x","trigger_id":"t"}}`
)

func TestReadHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, frame string
		want        head
	}{
		{"slack order", `{"envelope_id":"1d2c-4e","payload":{"type":"event_callback","event":{"type":"app_mention"}},"type":"events_api","accepts_response_payload":false,"retry_attempt":0,"retry_reason":""}`,
			head{id: "1d2c-4e", typ: "events_api"}},
		{"type after a payload full of traps", `{"payload":{"text":"\"envelope_id\":\"no\" } ] {","type":"x","a":[1,{"type":"y"}],"n":-1.5e3,"t":true,"z":null},"envelope_id":"e1","type":"interactive"}`,
			head{id: "e1", typ: "interactive"}},
		{"spaces", " \n{ \"type\" : \"slash_commands\" , \"envelope_id\" : \"s1\" } ", head{id: "s1", typ: "slash_commands"}},
		{"hello", `{"type":"hello","num_connections":1,"debug_info":{"host":"applink-1"},"connection_info":{"app_id":"A1"}}`, head{typ: "hello"}},
		{"disconnect", `{"type":"disconnect","reason":"refresh_requested","debug_info":{"host":"applink-1"}}`, head{typ: "disconnect", reason: "refresh_requested"}},
		{"escaped id", `{"envelope_id":"a\"b\u00e9","type":"events_api"}`, head{id: "a\"bé", typ: "events_api"}},
		{"null id", `{"envelope_id":null,"type":"events_api"}`, head{typ: "events_api"}},
		{"last of a repeated key", `{"type":"a","type":"b"}`, head{typ: "b"}},
		{"empty object", `{}`, head{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readHead([]byte(tc.frame))
			if err != nil || got != tc.want {
				t.Errorf("readHead = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"type":1}`, `{"type":"x"`, `{"type" "x"}`, `{"payload":{"a":"b}`, `{"type":"x",}`, `{type:"x"}`, `{"a":}`} {
		if h, err := readHead([]byte(bad)); err == nil {
			t.Errorf("readHead(%q) = %+v, want an error", bad, h)
		}
	}
}

// headByJSON reads the same fields as readHead with encoding/json (exact key match, the last
// of repeated keys, null as ""). Frames that spell one of the keys with escapes ("envelope\u005fid")
// are not compared: readHead matches keys as written (Slack writes them plainly); such a frame is
// acked by the consumer instead, after decoding.
func headByJSON(frame []byte) (head, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) != nil {
		return head{}, false
	}
	var h head
	for key, dst := range map[string]*string{"envelope_id": &h.id, "type": &h.typ, "reason": &h.reason} {
		if _, ok := m[key]; ok && !strings.Contains(string(frame), `"`+key+`"`) {
			return head{}, false // spelt with escapes
		}
		if v, ok := m[key]; ok && string(v) != "null" {
			if json.Unmarshal(v, dst) != nil {
				return head{}, false
			}
		}
	}
	return h, true
}

// readHead agrees with encoding/json on every input encoding/json accepts whose keys are written
// without escapes. (It may accept some invalid JSON, which the consumer's decoding then rejects.)
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{sampleMention, sampleCommand, sampleClick,
		`{"type":"disconnect","reason":"warning"}`, `{"envelope_id":"a\\u0022b","payload":[{"x":"}"}],"type":"t"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		want, ok := headByJSON(frame)
		if !ok {
			return
		}
		got, err := readHead(frame)
		if err != nil || got != want {
			t.Fatalf("readHead(%q) = %+v, %v; encoding/json reads %+v", frame, got, err, want)
		}
	})
}

func TestAckFrame(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"1d2c8d5e-4e2b-4f1a-9a77-6b1c0e3d2f10", `odd "id" \ é`, ""} {
		var got struct {
			EnvelopeID *string `json:"envelope_id"`
		}
		frame := ackFrame(id)
		if err := json.Unmarshal(frame, &got); err != nil || got.EnvelopeID == nil || *got.EnvelopeID != id {
			t.Errorf("ackFrame(%q) = %s (%v)", id, frame, err)
		}
	}
}
