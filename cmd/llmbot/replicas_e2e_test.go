package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/route"
)

// The tests here run the real binary as two replicas (separate processes) sharing a real
// redis-server, against one fake Slack that spreads envelopes over their connections as Slack
// does; and as one process with its local journal, killed and started again.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binOut  []byte
)

// botBinary builds the bot once for the tests of this file.
func botBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "llmbot-replicas")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "llmbot")
		binOut, binErr = exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("go build: %v\n%s", binErr, binOut)
	}
	return binPath
}

// replicaSet is the fakes and the bot processes of one test.
type replicaSet struct {
	t     *testing.T
	ctx   context.Context
	bin   string
	fs    *fakeslack.Server
	fl    *fakellm.Server
	env   []string
	procs []*replica
}

// replica is one bot process; conn is its Socket Mode connection's id in the fake.
type replica struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan error
	conn   int
}

func newReplicaSet(t *testing.T, env ...string) *replicaSet {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	rs := &replicaSet{t: t, ctx: ctx, bin: botBinary(t),
		fs: fakeslack.New(fakeslack.Config{BotToken: botToken, AppToken: appToken}), fl: fakellm.New()}
	t.Cleanup(rs.fs.Close)
	t.Cleanup(rs.fl.Close)
	rs.fl.SetAPIKey(llmKey)
	rs.env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"),
		"SLACK_BOT_TOKEN=" + botToken, "SLACK_APP_TOKEN=" + appToken, "OPENAI_API_KEY=" + llmKey,
		"SLACK_API_URL=" + rs.fs.URL(), "OPENAI_BASE_URL=" + rs.fl.URL(), "SHUTDOWN_GRACE=2s", "LOG_LEVEL=debug"}, env...)
	t.Cleanup(func() {
		for _, p := range rs.procs {
			p.kill()
		}
		if t.Failed() {
			for i, p := range rs.procs {
				t.Logf("replica %d (connection %d) logs:\n%s", i+1, p.conn, p.logs.String())
			}
		}
		for _, p := range rs.procs {
			if strings.Contains(p.logs.String(), secret) {
				t.Errorf("a credential appears in a replica's logs")
			}
		}
	})
	return rs
}

// start starts one more replica with the set's environment plus env, and waits for its
// connection.
func (rs *replicaSet) start(env ...string) *replica {
	rs.t.Helper()
	before := len(rs.fs.Conns())
	p := &replica{logs: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(rs.bin)
	p.cmd.Env = append(append([]string{}, rs.env...), env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		rs.t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }() // ends with the process, which kill or the test ends
	rs.procs = append(rs.procs, p)
	rs.wait("the replica's connection", func() bool { return len(rs.fs.Conns()) > before })
	p.conn = rs.fs.Conns()[before].ID
	return p
}

// kill ends the process at once, as an OOM kill or a lost node does.
func (p *replica) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.exited <- nil // for a second kill
}

func (rs *replicaSet) wait(what string, cond func() bool) {
	rs.t.Helper()
	if err := rs.fs.WaitFor(rs.ctx, cond); err != nil {
		var shown []string
		for _, m := range rs.fs.Messages("C1") {
			shown = append(shown, m.TS+" "+m.ThreadTS+" "+m.Text)
		}
		rs.t.Fatalf("waiting for %s: %v; C1 shows:\n%s", what, err, strings.Join(shown, "\n"))
	}
}

// ask posts a mention in C1 whose events go to replica p, and returns its ts.
func (rs *replicaSet) ask(p *replica, text string) string {
	rs.t.Helper()
	ts, err := rs.fs.Via(p.conn).Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> " + text})
	if err != nil {
		rs.t.Fatal(err)
	}
	return ts
}

// answer is the bot's messages in the thread of ts, joined.
func (rs *replicaSet) answer(ts string) string {
	var parts []string
	for _, m := range rs.fs.BotReplies("C1", ts) {
		parts = append(parts, m.Text)
	}
	return strings.Join(parts, "\n")
}

func (rs *replicaSet) buttonsOf(ts string) []string {
	var ids []string
	for _, m := range rs.fs.BotReplies("C1", ts) {
		for _, b := range m.Buttons() {
			ids = append(ids, b.ActionID)
		}
	}
	return ids
}

func twoReplicas(t *testing.T) (*replicaSet, *replica, *replica) {
	rs := newReplicaSet(t, "REDIS_URL="+redistest.New(t).URL())
	return rs, rs.start(), rs.start()
}

const longAnswer = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty."

// TestReplicasRedeliveryIsAnsweredOnce: Slack retries an event on another replica's connection;
// the question gets one answer and one model request.
func TestReplicasRedeliveryIsAnsweredOnce(t *testing.T) {
	t.Parallel()
	rs, a, b := twoReplicas(t)
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text("Four.").Paced(300*time.Millisecond, 50*time.Millisecond)
	})
	ts := rs.ask(a, "what is 2+2?")
	var first string
	rs.wait("the mention's envelope", func() bool {
		for _, e := range rs.fs.Envelopes() {
			if e.EventType == "app_mention" && e.Conn == a.conn && !e.Acked.IsZero() {
				first = e.ID
				return true
			}
		}
		return false
	})
	if rs.fs.RedeliverTo(first, b.conn) == "" {
		t.Fatal("redelivery to the other replica refused")
	}
	rs.wait("the answer", func() bool { return strings.Contains(rs.answer(ts), "Four.") })
	time.Sleep(2 * time.Second) // time for a second answer, were one coming
	if n := len(rs.fs.BotReplies("C1", ts)); n != 1 {
		t.Errorf("%d bot messages in the thread; want one answer:\n%s", n, rs.answer(ts))
	}
	if n := rs.fl.Counts().Chat; n != 1 {
		t.Errorf("%d model requests; want 1", n)
	}
}

// TestReplicasStopOnAnotherReplica: the asker presses Stop and the click lands on the replica
// that is not writing the answer; the model stream closes within a second and the answer shows
// it was stopped.
func TestReplicasStopOnAnotherReplica(t *testing.T) {
	t.Parallel()
	rs, a, b := twoReplicas(t)
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(strings.Repeat(longAnswer+" ", 20)).Paced(100*time.Millisecond, 100*time.Millisecond)
	})
	ts := rs.ask(a, "count for me")
	rs.wait("a partial answer with Stop", func() bool {
		return strings.Contains(rs.answer(ts), "One two") && strings.Contains(strings.Join(rs.buttonsOf(ts), " "), "stop")
	})
	msgs := rs.fs.BotReplies("C1", ts)
	clicked := time.Now()
	if _, err := rs.fs.Via(b.conn).Click("C1", msgs[len(msgs)-1].TS, "U1", stopAction(t, msgs[len(msgs)-1])); err != nil {
		t.Fatal(err)
	}
	rs.wait("the model stream to close", func() bool { return rs.fl.Counts().ClientGone == 1 })
	t.Logf("the model stream closed %v after the click", rs.fl.Requests()[0].End.Sub(clicked).Round(time.Millisecond))
	if r := rs.fl.Requests(); r[0].End.Sub(clicked) > time.Second {
		t.Errorf("the model stream closed %v after the click; want within 1 s", r[0].End.Sub(clicked))
	}
	rs.wait("the stopped answer", func() bool { return strings.Contains(rs.answer(ts), "Stopped") })
	if _, ok := rs.fs.Private("C1", ts, "U1"); ok {
		t.Errorf("the asker was told something privately; want only the stopped answer")
	}
}

// TestReplicasSessionStopOnAnotherReplica: the asker presses Slack's Stop on the agent session
// of a natively streamed answer, and the event lands on the replica that is not writing it: it
// is handed over like a Stop click, and the writer moves the session off processing.
func TestReplicasSessionStopOnAnotherReplica(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, "REDIS_URL="+redistest.New(t).URL(), "REPLY_MODE=stream")
	a, b := rs.start(), rs.start()
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(strings.Repeat(longAnswer+" ", 20)).Paced(100*time.Millisecond, 100*time.Millisecond)
	})
	ts := rs.ask(a, "count for me")
	rs.wait("a partial streamed answer", func() bool { return strings.Contains(rs.answer(ts), "One two") })
	if _, err := rs.fs.Via(b.conn).StopSession("C1", ts, "U1"); err != nil {
		t.Fatal(err)
	}
	rs.wait("the model stream to close", func() bool { return rs.fl.Counts().ClientGone == 1 })
	rs.wait("the stopped answer", func() bool { return strings.Contains(rs.answer(ts), "Stopped") })
	rs.wait("the session moved off processing", func() bool {
		st := rs.fs.SessionStatuses("C1", ts)
		return len(st) > 0 && st[len(st)-1] == route.SessionActive
	})
	if !strings.Contains(b.logs.String(), "stop handed to the replica writing the answer") {
		t.Errorf("the replica that got the event did not hand it over")
	}
	if _, ok := rs.fs.Private("C1", ts, "U1"); ok {
		t.Errorf("the asker was told something privately; want only the stopped answer")
	}
}

// TestReplicasSessionStopOfAFollowUpOnAnotherReplica: Slack's Stop names only the thread; when the
// answer running there is a follow-up's (no journal record by the thread's first message), the
// replica holding the thread gets the stop.
func TestReplicasSessionStopOfAFollowUpOnAnotherReplica(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, "REDIS_URL="+redistest.New(t).URL(), "REPLY_MODE=stream")
	a, b := rs.start(), rs.start()
	rs.fl.SetChat(fakellm.Sequence(fakellm.Text("First."),
		fakellm.Text(strings.Repeat(longAnswer+" ", 20)).Paced(100*time.Millisecond, 100*time.Millisecond)))
	ts := rs.ask(a, "count for me")
	rs.wait("the first answer", func() bool { return strings.Contains(rs.answer(ts), "First.") })
	if _, err := rs.fs.Via(a.conn).Post(fakeslack.UserMessage{Channel: "C1", User: "U1", ThreadTS: ts, Text: "and then?"}); err != nil {
		t.Fatal(err)
	}
	rs.wait("the follow-up's partial answer", func() bool { return strings.Contains(rs.answer(ts), "One two") })
	if _, err := rs.fs.Via(b.conn).StopSession("C1", ts, "U1"); err != nil {
		t.Fatal(err)
	}
	rs.wait("the model stream to close", func() bool { return rs.fl.Counts().ClientGone == 1 })
	rs.wait("the stopped answer", func() bool { return strings.Contains(rs.answer(ts), "Stopped") })
	if !strings.Contains(b.logs.String(), "stop handed to the replica writing the answer") {
		t.Errorf("the replica that got the event did not hand it over")
	}
}

// stopAction is the action id of the Stop button on m.
func stopAction(t *testing.T, m fakeslack.Message) string {
	t.Helper()
	for _, b := range m.Buttons() {
		if strings.Contains(b.ActionID, "stop") {
			return b.ActionID
		}
	}
	t.Fatalf("no Stop button on %+v", m)
	return ""
}

// TestReplicasRegenerateOnAnotherReplica: Regenerate pressed on an answer that another replica
// wrote gives a new answer in its place.
func TestReplicasRegenerateOnAnotherReplica(t *testing.T) {
	t.Parallel()
	rs, a, b := twoReplicas(t)
	rs.fl.SetChat(fakellm.Sequence(fakellm.Text("First answer."), fakellm.Text("Second answer.")))
	ts := rs.ask(a, "say something")
	rs.wait("the first answer with Regenerate", func() bool {
		return strings.Contains(rs.answer(ts), "First answer.") && strings.Contains(strings.Join(rs.buttonsOf(ts), " "), "regenerate")
	})
	m := rs.fs.BotReplies("C1", ts)[0]
	var action string
	for _, btn := range m.Buttons() {
		if strings.Contains(btn.ActionID, "regenerate") {
			action = btn.ActionID
		}
	}
	if _, err := rs.fs.Via(b.conn).Click("C1", m.TS, "U1", action); err != nil {
		t.Fatal(err)
	}
	rs.wait("the second answer in place", func() bool { return strings.Contains(rs.answer(ts), "Second answer.") })
	if got := rs.fs.BotReplies("C1", ts); len(got) != 1 || got[0].TS != m.TS {
		t.Errorf("bot messages %+v; want the first answer's message rewritten", got)
	}
}

// TestReplicasKilledReplicaAnswerIsClosed: the replica writing an answer is killed (kill -9);
// the other closes the answer within 30 s: what it showed stays, marked interrupted, with
// Regenerate.
func TestReplicasKilledReplicaAnswerIsClosed(t *testing.T) {
	t.Parallel()
	rs, a, _ := twoReplicas(t)
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(longAnswer).StallAfter(4) })
	ts := rs.ask(a, "count for me")
	rs.wait("a partial answer", func() bool { return strings.Contains(rs.answer(ts), "One two") })
	a.kill()
	killed := time.Now()
	rs.wait("the answer closed by the survivor", func() bool { return strings.Contains(rs.answer(ts), "Interrupted") })
	took := time.Since(killed)
	t.Logf("closed %v after the kill", took.Round(100*time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("closed %v after the kill; want within 30 s", took)
	}
	if got := rs.answer(ts); !strings.Contains(got, "One two") || strings.Contains(got, "Thinking") {
		t.Errorf("answer after the kill %q; want the partial text kept", got)
	}
	if !strings.Contains(strings.Join(rs.buttonsOf(ts), " "), "regenerate") {
		t.Errorf("buttons %v; want Regenerate", rs.buttonsOf(ts))
	}
}

// TestRestartClosesAnswersOfTheKilledProcess: one replica without Redis is killed mid-answer and
// started again on the same STATE_DIR; it closes the answer it was writing.
func TestRestartClosesAnswersOfTheKilledProcess(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, "STATE_DIR="+t.TempDir())
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(longAnswer).StallAfter(4) })
	a := rs.start()
	ts := rs.ask(a, "count for me")
	rs.wait("a partial answer", func() bool { return strings.Contains(rs.answer(ts), "One two") })
	a.kill()
	restarted := time.Now()
	rs.start()
	rs.wait("the answer closed after the restart", func() bool { return strings.Contains(rs.answer(ts), "Interrupted") })
	t.Logf("closed %v after the restart", time.Since(restarted).Round(100*time.Millisecond))
	if took := time.Since(restarted); took > 10*time.Second {
		t.Errorf("closed %v after the restart; want within seconds", took)
	}
}

// TestReplicasAnswerThroughARedisOutage: Redis stops and comes back while both replicas run;
// questions asked meanwhile are answered, and so are those asked after.
func TestReplicasAnswerThroughARedisOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rs := newReplicaSet(t, "REDIS_URL="+srv.URL())
	a, b := rs.start(), rs.start()
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Answered.") })
	for _, p := range []*replica{a, b} {
		ts := rs.ask(p, "before")
		rs.wait("an answer before the outage", func() bool { return strings.Contains(rs.answer(ts), "Answered.") })
	}
	srv.Stop()
	for _, p := range []*replica{a, b} {
		ts := rs.ask(p, "during")
		rs.wait("an answer during the outage", func() bool { return strings.Contains(rs.answer(ts), "Answered.") })
	}
	srv.Restart()
	for _, p := range []*replica{a, b} {
		ts := rs.ask(p, "after")
		rs.wait("an answer after the outage", func() bool { return strings.Contains(rs.answer(ts), "Answered.") })
	}
}

// TestReplicaStartsWhileRedisIsDown: Redis down at start-up does not keep the bot down: it
// answers with its own state, and shares it once Redis is back.
func TestReplicaStartsWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	srv.Stop()
	rs := newReplicaSet(t, "REDIS_URL="+srv.URL())
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Answered.") })
	a := rs.start()
	ts := rs.ask(a, "while Redis is down")
	rs.wait("an answer without Redis", func() bool { return strings.Contains(rs.answer(ts), "Answered.") })
	srv.Restart()
	rs.wait("the replica back on Redis", func() bool { return strings.Contains(a.logs.String(), "Redis answers again") })
	ts = rs.ask(a, "with Redis back")
	rs.wait("an answer with Redis back", func() bool { return strings.Contains(rs.answer(ts), "Answered.") })
}
