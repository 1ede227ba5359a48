package route

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// nop is a handler that runs nothing.
var nop = Funcs{AcceptFunc: func(*Request) Decision { return Decision{} }}

func TestAddRefusesBadRoutes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route Route
		want  string
	}{
		{"empty name", Route{Kind: Command, Name: "", Handler: nop}, "without a name"},
		{"blank name", Route{Kind: Action, Name: "  ", Handler: nop}, "without a name"},
		{"no kind", Route{Name: "/imagine", Handler: nop}, "without a name"},
		{"nil handler", Route{Kind: Command, Name: "/imagine"}, "has no handler"},
		{"registered twice", Route{Kind: Command, Name: "/ask", Handler: nop}, "registered twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := NewTable()
			if err := table.Add(Route{Kind: Command, Name: "/ask", Handler: nop}); err != nil {
				t.Fatal(err)
			}
			err := table.Add(tc.route)
			if !errors.Is(err, ErrBadRoute) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Add = %v, want ErrBadRoute saying %q", err, tc.want)
			}
		})
	}
}

func TestAddReportsEveryBadRoute(t *testing.T) {
	err := NewTable().Add(Route{Kind: Command, Name: "/a"}, Route{Kind: Action, Handler: nop})
	if n := strings.Count(err.Error(), "bad route"); n != 2 {
		t.Errorf("Add = %v, want both routes named", err)
	}
}

func TestLookup(t *testing.T) {
	table := NewTable()
	err := table.Add(
		Route{Kind: Command, Name: "/imagine", Handler: nop},
		Route{Kind: Action, Name: "llmbot_imagine_again", Feature: "imagine", Handler: nop},
		Route{Kind: Message, Name: MessageRoute, Handler: nop},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req     Request
		found   bool
		feature string
	}{
		{Request{Kind: Command, Name: "/imagine"}, true, "imagine"},
		{Request{Kind: Action, Name: "llmbot_imagine_again"}, true, "imagine"},
		{Request{Kind: Message, Name: MessageRoute, Feature: FeatureDM}, true, FeatureDM},
		{Request{Kind: Action, Name: "/imagine"}, false, ""},
		{Request{Kind: Command, Name: "/summarize"}, false, ""},
	} {
		req := tc.req
		_, found := table.Lookup(&req)
		if found != tc.found || req.Feature != tc.feature {
			t.Errorf("Lookup(%s %s) found %t with feature %q, want %t with %q", tc.req.Kind, tc.req.Name, found, req.Feature, tc.found, tc.feature)
		}
	}
}

// TestMiddlewareOrder: the first middleware is the outermost, around Accept and Run alike.
func TestMiddlewareOrder(t *testing.T) {
	var trace []string
	mark := func(name string) Middleware {
		return func(next Handler) Handler {
			return Funcs{
				AcceptFunc: func(req *Request) Decision { trace = append(trace, name+".accept"); return next.Accept(req) },
				RunFunc: func(ctx context.Context, req *Request) error {
					trace = append(trace, name+".run")
					return next.Run(ctx, req)
				},
			}
		}
	}
	table := NewTable(mark("access"), mark("metrics"))
	h := Funcs{
		AcceptFunc: func(*Request) Decision { trace = append(trace, "handler.accept"); return Decision{Run: true} },
		RunFunc:    func(context.Context, *Request) error { trace = append(trace, "handler.run"); return nil },
	}
	if err := table.Add(Route{Kind: Command, Name: "/x", Handler: h}); err != nil {
		t.Fatal(err)
	}
	req := &Request{Kind: Command, Name: "/x"}
	got, _ := table.Lookup(req)
	got.Accept(req)
	_ = got.Run(t.Context(), req)
	want := "access.accept metrics.accept handler.accept access.run metrics.run handler.run"
	if s := strings.Join(trace, " "); s != want {
		t.Errorf("calls %q\nwant  %q", s, want)
	}
}

func TestReplyRequestFeature(t *testing.T) {
	for _, tc := range []struct {
		req  ReplyRequest
		want string
	}{
		{ReplyRequest{Channel: "C1", ChannelType: "channel"}, FeatureMention},
		{ReplyRequest{Channel: "C1", ChannelType: "channel", FollowUp: true}, FeatureFollowUp},
		{ReplyRequest{Channel: "D1", ChannelType: "im"}, FeatureDM},
		{ReplyRequest{Channel: "D1"}, FeatureDM},
		{ReplyRequest{Channel: "G1", ChannelType: "mpim"}, FeatureMention},
	} {
		if got := tc.req.Feature(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.req, got, tc.want)
		}
	}
}
