package schedule

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/route"
)

type fakeSubmitter struct {
	reqs []*route.Request
	err  error
}

func (f *fakeSubmitter) Submit(_ context.Context, req *route.Request) error {
	f.reqs = append(f.reqs, req)
	return f.err
}

// TestAskPostsThenAsksAsTheCreator: an occurrence is a new message in the channel naming the schedule
// and its creator, then the prompt asked in its thread as a mention by the creator.
func TestAskPostsThenAsksAsTheCreator(t *testing.T) {
	slack, sub := gatewaytest.NewSlack(), &fakeSubmitter{}
	sc := Schedule{ID: "ab12cd34", Team: "T1", Channel: "C1", Creator: "U1", When: "every weekday at 09:00 UTC", Prompt: "What broke? <!channel>"}
	if err := NewAsker(slack, sub).Ask(t.Context(), sc, time.Now()); err != nil {
		t.Fatal(err)
	}
	posts := slack.CallsOf("post")
	if len(posts) != 1 || posts[0].Thread != "" || posts[0].Mark.Kind != convo.MarkNotice ||
		!strings.Contains(posts[0].Text, "`ab12cd34` of <@U1>") || strings.Contains(posts[0].Text, "<!channel>") {
		t.Fatalf("posts = %+v, want one top-level notice naming the schedule and its creator, pinging nobody", posts)
	}
	want := route.ReplyRequest{Channel: "C1", ChannelType: "channel", User: "U1", Team: "T1", TS: posts[0].TS, ThreadTS: posts[0].TS, Text: sc.Prompt}
	if len(sub.reqs) != 1 || sub.reqs[0].Kind != route.Message || sub.reqs[0].Feature != route.FeatureMention || sub.reqs[0].User != "U1" || sub.reqs[0].Reply == nil || !reflect.DeepEqual(*sub.reqs[0].Reply, want) {
		t.Fatalf("submitted %+v, want one message route request %+v", sub.reqs, want)
	}
}

// TestAskFails: a post or a hand-over that fails is Ask's error (the runner tells the creator).
func TestAskFails(t *testing.T) {
	slack, sub := gatewaytest.NewSlack(), &fakeSubmitter{err: errors.New("bot: not running")}
	sc := Schedule{ID: "ab12cd34", Channel: "C1", Creator: "U1", Prompt: "hi"}
	if err := NewAsker(slack, sub).Ask(t.Context(), sc, time.Now()); err == nil {
		t.Fatal("Ask = nil, want the hand-over's error")
	}
	slack.PostErr = func(int, gatewaytest.Call) error { return errors.New("not_in_channel") }
	if err := NewAsker(slack, &fakeSubmitter{}).Ask(t.Context(), sc, time.Now()); err == nil {
		t.Fatal("Ask = nil, want the post's error")
	}
}

// TestAskHandsASummaryToItsRoute: a summary's occurrence posts nothing itself; it is submitted to the
// route EventSummary as its creator's request, naming the schedule.
func TestAskHandsASummaryToItsRoute(t *testing.T) {
	slack, sub := gatewaytest.NewSlack(), &fakeSubmitter{}
	sc := Schedule{ID: "ab12cd34", Team: "T1", Channel: "C1", Creator: "U1", When: "every monday at 09:00 UTC", Prompt: "summarize 7d"}
	if err := NewAsker(slack, sub).Ask(t.Context(), sc, time.Now()); err != nil {
		t.Fatal(err)
	}
	want := route.Request{Kind: route.Event, Name: EventSummary, Channel: "C1", User: "U1", Team: "T1", Text: "ab12cd34"}
	if posts := slack.CallsOf("post"); len(posts) != 0 || len(sub.reqs) != 1 || !reflect.DeepEqual(*sub.reqs[0], want) {
		t.Fatalf("posts %+v, submitted %+v; want no post and %+v", posts, sub.reqs, want)
	}
}
