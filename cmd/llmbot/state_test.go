package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/ops"
)

// TestStateOfTwoAppsIsApartWhenBotsInfoFails: two apps of one team share a Redis. When bots.info
// does not say which app a bot is (it failed, or the scope is missing), the bot id stands for the
// app, so the two still keep apart: a message each claims is the first for each (one app does not
// drop the other's mentions as already answered), while two replicas of one bot share their claims.
func TestStateOfTwoAppsIsApartWhenBotsInfoFails(t *testing.T) {
	t.Parallel()
	url := redistest.New(t).URL()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func(id bot.Identity) sharedState {
		cfg := Config{RedisURL: url, StateDir: t.TempDir()}
		s, err := openState(ctx, cfg, id, ops.NewMetrics(), ops.NewReadiness(), zaptest.NewLogger(t))
		if err != nil {
			t.Fatalf("openState: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	appA := open(bot.Identity{UserID: "UA", BotID: "BA", TeamID: "T1"})
	appB := open(bot.Identity{UserID: "UB", BotID: "BB", TeamID: "T1"})
	appAAgain := open(bot.Identity{UserID: "UA", BotID: "BA", TeamID: "T1"})

	claims := []struct {
		who  string
		s    sharedState
		want bool
	}{
		{"app A", appA, true},
		{"app B, the same message", appB, true},
		{"another replica of app A", appAAgain, false},
	}
	for _, c := range claims {
		first, err := c.s.replicas.Claims.Claim(ctx, "answer:C1/1700000000.000100", time.Minute)
		if err != nil {
			t.Fatalf("%s: Claim: %v", c.who, err)
		}
		if first != c.want {
			t.Errorf("%s: first claim = %v, want %v", c.who, first, c.want)
		}
	}
}
