package main

// End-to-end tests of the approval scopes and approvers: the real wiring, the fake Slack, the fake
// model and the e2e MCP server (tools_e2e_test.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/redistest"
)

// startApproversE2E runs the bot with the e2e MCP server as "srv" for channel C1, its server entry
// ending with extra (MCP_CONFIG lines, indented as the server's keys).
func startApproversE2E(t *testing.T, extra string, env map[string]string) *e2e {
	t.Helper()
	dir := t.TempDir()
	mcpFile, chFile := filepath.Join(dir, "mcp.yaml"), filepath.Join(dir, "channels.yaml")
	mustWrite(t, mcpFile, "servers:\n  - name: srv\n    command: "+os.Args[0]+"\n    args: [\"-test.run=^$\"]\n    env: {"+
		mcpServerEnv+": \"1\"}\n"+extra)
	mustWrite(t, chFile, "channels:\n  C1:\n    tools: [srv]\n")
	full := map[string]string{"MCP_CONFIG": mcpFile, "CHANNEL_CONFIG": chFile}
	for k, v := range env {
		full[k] = v
	}
	e := startE2E(t, fakeslack.Config{}, full)
	e.waitFor(t, "the MCP server", func() bool { return strings.Contains(e.logs.String(), `"msg":"MCP server up"`) })
	return e
}

// answerIn waits for the answer in q's thread that contains want.
func (e *e2e) answerIn(t *testing.T, q, want string) string {
	t.Helper()
	var got string
	e.waitFor(t, "the answer with "+want, func() bool {
		for _, m := range e.slack.BotReplies("C1", q) {
			if markOf(t, m).Kind == convo.MarkAnswer && strings.Contains(m.Text, want) && len(m.Text) > 0 {
				got = m.Text
				return e.finished(t) >= 1
			}
		}
		return false
	})
	return got
}

// TestE2EToolAlwaysAllowedListedRevoked: the asker's Always allow runs the tool without a prompt in
// their next thread; /llmbot tools lists it, revoke makes the next call ask again.
func TestE2EToolAlwaysAllowedListedRevoked(t *testing.T) {
	t.Parallel()
	e := startToolsE2E(t, nil)
	e.llm.SetChat(toolModel(1, fakellm.WireOpenAI, lookupCall()))
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> is the Oslo ticket open?")
	p := e.prompt(t, q)
	if got := buttonsOf(p); got != strings.Join([]string{approvals.ActionToolAllowOnce, approvals.ActionToolAllowThread,
		approvals.ActionToolAllowAlways, approvals.ActionToolDeny}, ",") {
		t.Errorf("buttons %s", got)
	}
	e.click(t, "C1", p.TS, "U1", approvals.ActionToolAllowAlways)
	e.answerIn(t, q, "ticket for Oslo is open")
	if m, _ := e.slack.Message("C1", e.publicLine(t, q).TS); !strings.Contains(m.Text, "Always allowed") {
		t.Errorf("settled line %q", m.Text)
	}

	q2 := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> and now?")
	e.waitFor(t, "the second answer", func() bool {
		for _, m := range e.slack.BotReplies("C1", q2) {
			if markOf(t, m).Kind == convo.MarkAnswer && strings.Contains(m.Text, "ticket for Oslo is open") {
				return true
			}
		}
		return false
	})
	if ps := privatePrompts(e.slack, q2, "U1"); len(ps) != 0 {
		t.Errorf("always allowed, yet prompted in another thread: %q", ps[0].Text)
	}

	e.slack.SlashCommand("C1", "U1", "/llmbot", "tools")
	e.lastPrivate(t, "the list", "U1", func(p fakeslack.ResponseURLPost) bool { return strings.Contains(p.Text, "`srv__lookup` of *srv*") })
	e.slack.SlashCommand("C1", "U1", "/llmbot", "tools revoke srv__lookup")
	e.lastPrivate(t, "the revocation", "U1", func(p fakeslack.ResponseURLPost) bool { return strings.Contains(p.Text, "Revoked") })

	q3 := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> once more?")
	e.waitFor(t, "a prompt again after the revocation", func() bool { return len(privatePrompts(e.slack, q3, "U1")) == 1 })
}

// TestE2EToolApprovers: a tool with approvers (a person and a user group) is decided by them alone:
// the person named is shown the prompt; the asker, not listed, asking to see it is told who may
// decide; a member of the group asks to see it, allows it, and the thread's line says who did.
// Standing grants are not offered.
func TestE2EToolApprovers(t *testing.T) {
	t.Parallel()
	e := startApproversE2E(t, "    approvers: [U07ALICE, S01OPS]\n", nil)
	e.slack.SetUserGroup("S01OPS", "U5", "U6")
	e.llm.SetChat(toolModel(1, fakellm.WireOpenAI, lookupCall()))
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> is the Oslo ticket open?")
	var alice fakeslack.Message
	e.waitFor(t, "the named approver's prompt", func() bool {
		ps := privatePrompts(e.slack, q, "U07ALICE")
		if len(ps) > 0 {
			alice = ps[0]
		}
		return len(ps) > 0
	})
	if got := buttonsOf(alice); got != approvals.ActionToolAllowOnce+","+approvals.ActionToolDeny {
		t.Errorf("buttons %s: want Allow once and Deny only", got)
	}
	for _, want := range []string{"<!subteam^S01OPS>, <@U07ALICE>, may I", "<@U1> asked for it", `"city": "Oslo"`} {
		if !strings.Contains(alice.Text, want) {
			t.Errorf("prompt %q lacks %q", alice.Text, want)
		}
	}
	line := e.publicLine(t, q)
	if !strings.Contains(line.Text, "<!subteam^S01OPS>, <@U07ALICE> to approve") || strings.Contains(line.Text, "Oslo") {
		t.Errorf("public line %q", line.Text)
	}
	e.click(t, "C1", line.TS, "U1", approvals.ActionToolShowApproval)
	e.waitFor(t, "the asker told", func() bool { return len(e.privateTo("U1")) == 1 })
	if got := e.privateTo("U1")[0]; got != fmt.Sprintf(approvals.TextNotApproverNamed, "<!subteam^S01OPS>, <@U07ALICE>") {
		t.Errorf("the asker told %q", got)
	}
	e.click(t, "C1", line.TS, "U6", approvals.ActionToolShowApproval)
	var p fakeslack.Message
	e.waitFor(t, "the prompt shown to the group's member", func() bool {
		ps := privatePrompts(e.slack, q, "U6")
		if len(ps) > 0 {
			p = ps[0]
		}
		return len(ps) > 0
	})
	e.click(t, "C1", p.TS, "U6", approvals.ActionToolAllowOnce)
	e.answerIn(t, q, "ticket for Oslo is open")
	if m, _ := e.slack.Message("C1", line.TS); !strings.Contains(m.Text, "Allowed once by <@U6>") || buttonsOf(m) != "" {
		t.Errorf("settled line %q", m.Text)
	}
}

// TestE2EToolPublicArguments: public_arguments keeps the prompt, arguments included, in the thread
// for all to see, and nothing private.
func TestE2EToolPublicArguments(t *testing.T) {
	t.Parallel()
	e := startApproversE2E(t, "    public_arguments: [lookup]\n", nil)
	e.llm.SetChat(toolModel(1, fakellm.WireOpenAI, lookupCall()))
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> is the Oslo ticket open?")
	var p fakeslack.Message
	e.waitFor(t, "the public prompt", func() bool {
		for _, m := range e.slack.BotReplies("C1", q) {
			if strings.Contains(buttonsOf(m), approvals.ActionToolAllowOnce) && strings.Contains(m.Text, `"city": "Oslo"`) {
				p = m
				return true
			}
		}
		return false
	})
	e.click(t, "C1", p.TS, "U1", approvals.ActionToolAllowOnce)
	e.answerIn(t, q, "ticket for Oslo is open")
	if n := len(e.slack.Ephemerals()); n != 0 {
		t.Errorf("%d private messages, want none", n)
	}
}

// TestE2EToolApproversGroupUnreadable: approvers naming a user group Slack does not return: the
// call is denied, said in the thread, and nobody is prompted.
func TestE2EToolApproversGroupUnreadable(t *testing.T) {
	t.Parallel()
	e := startApproversE2E(t, "    tool_approvers: {lookup: [S09GONE]}\n", nil)
	e.llm.SetChat(toolModel(1, fakellm.WireOpenAI, lookupCall()))
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> is the Oslo ticket open?")
	got := e.answerIn(t, q, "was not used")
	if !strings.Contains(got, "Done: The tool srv__lookup could not be used") {
		t.Errorf("answer %q", got)
	}
	var notice string
	for _, m := range e.slack.BotReplies("C1", q) {
		if strings.Contains(m.Text, "needs the approval of S09GONE") {
			notice = m.Text
		}
	}
	if notice == "" || len(e.slack.Ephemerals()) != 0 {
		t.Errorf("notice %q, %d private prompts", notice, len(e.slack.Ephemerals()))
	}
}

// TestRestartLapsesAPendingApproval: the replica waiting for an approval is killed and started
// again on the same STATE_DIR: the orphans' closer closes the answer, the approval's line in the
// thread is rewritten as lapsed (ask again), and a late click on the asker's private prompt is
// told plainly that the request lapsed.
func TestRestartLapsesAPendingApproval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mcpFile, chFile := filepath.Join(dir, "mcp.yaml"), filepath.Join(dir, "channels.yaml")
	mustWrite(t, mcpFile, "servers:\n  - name: srv\n    command: "+os.Args[0]+"\n    args: [\"-test.run=^$\"]\n    env: {"+mcpServerEnv+": \"1\"}\n")
	mustWrite(t, chFile, "channels:\n  C1:\n    tools: [srv]\n")
	rs := newReplicaSet(t, "STATE_DIR="+filepath.Join(dir, "state"), "MCP_CONFIG="+mcpFile, "CHANNEL_CONFIG="+chFile)
	rs.fl.SetChat(toolModel(1, fakellm.WireOpenAI, lookupCall()))
	a := rs.start()
	rs.wait("the MCP server", func() bool { return strings.Contains(a.logs.String(), "MCP server up") })
	ts := rs.ask(a, "is the Oslo ticket open?")
	var prompt, line fakeslack.Message
	rs.wait("the private prompt and the public line", func() bool {
		ps := privatePrompts(rs.fs, ts, "U1")
		for _, m := range rs.fs.BotReplies("C1", ts) {
			if strings.Contains(m.Text, "to approve") {
				line = m
			}
		}
		if len(ps) > 0 {
			prompt = ps[0]
		}
		return len(ps) > 0 && line.TS != ""
	})
	a.kill()
	rs.start()
	rs.wait("the line rewritten as lapsed", func() bool {
		m, _ := rs.fs.Message("C1", line.TS)
		return strings.Contains(m.Text, "Lapsed: `srv__lookup`") && strings.Contains(m.Text, "Ask again") && len(m.Buttons()) == 0
	})
	if _, err := rs.fs.Click("C1", prompt.TS, "U1", approvals.ActionToolAllowOnce); err != nil {
		t.Fatal(err)
	}
	rs.wait("the asker told the request lapsed", func() bool {
		for _, e := range rs.fs.Ephemerals() {
			if e.User == "U1" && e.Text == approvals.TextApprovalOver {
				return true
			}
		}
		return false
	})
}

// TestReplicasApproverAndAlwaysAcrossReplicas: on two replicas sharing a real redis-server, an
// approver's click that lands on the replica not writing the answer is handed over and decides
// (the hand-over keeps that the call has approvers); and the asker's Always allow given on one
// replica lets the next call through on the other.
func TestReplicasApproverAndAlwaysAcrossReplicas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mcpFile, chFile := filepath.Join(dir, "mcp.yaml"), filepath.Join(dir, "channels.yaml")
	mustWrite(t, mcpFile, "servers:\n  - name: srv\n    command: "+os.Args[0]+"\n    args: [\"-test.run=^$\"]\n    env: {"+
		mcpServerEnv+": \"1\"}\n    tool_approvers: {weather: [U07ALICE]}\n")
	mustWrite(t, chFile, "channels:\n  C1:\n    tools: [srv]\n")
	rs := newReplicaSet(t, "REDIS_URL="+redistest.New(t).URL(), "MCP_CONFIG="+mcpFile, "CHANNEL_CONFIG="+chFile)
	a, b := rs.start(), rs.start()
	rs.wait("the MCP servers", func() bool {
		return strings.Contains(a.logs.String(), "MCP server up") && strings.Contains(b.logs.String(), "MCP server up")
	})
	privateTo := func(ts, user string) fakeslack.Message {
		var p fakeslack.Message
		rs.wait("the prompt to "+user, func() bool {
			ps := privatePrompts(rs.fs, ts, user)
			if len(ps) > 0 {
				p = ps[0]
			}
			return len(ps) > 0
		})
		return p
	}

	rs.fl.SetChat(toolModel(1, fakellm.WireOpenAI, fakellm.ToolCall{ID: "w", Name: "srv__weather", Arguments: `{"city":"Oslo"}`}))
	ts := rs.ask(a, "weather in Oslo?")
	p := privateTo(ts, "U07ALICE")
	if _, err := rs.fs.Via(b.conn).Click("C1", p.TS, "U07ALICE", approvals.ActionToolAllowOnce); err != nil {
		t.Fatal(err)
	}
	rs.wait("the answer with the tool's result", func() bool { return strings.Contains(rs.answer(ts), "sunny in Oslo") })
	if !strings.Contains(b.logs.String(), "tool approval handed to the replica writing the answer") {
		t.Error("the approver's click was not handed over")
	}

	rs.fl.SetChat(toolModel(1, fakellm.WireOpenAI, lookupCall()))
	ts = rs.ask(a, "is the Oslo ticket open?")
	p = privateTo(ts, "U1")
	if _, err := rs.fs.Via(a.conn).Click("C1", p.TS, "U1", approvals.ActionToolAllowAlways); err != nil {
		t.Fatal(err)
	}
	rs.wait("the answer with the ticket", func() bool { return strings.Contains(rs.answer(ts), "ticket for Oslo is open") })
	ts = rs.ask(b, "and now?")
	rs.wait("the answer on the other replica", func() bool { return strings.Contains(rs.answer(ts), "Done: ") })
	if !strings.Contains(rs.answer(ts), "ticket for Oslo is open") || len(privatePrompts(rs.fs, ts, "U1")) != 0 {
		t.Errorf("always allowed on one replica, the other asked again or did not call: %q", rs.answer(ts))
	}
}
