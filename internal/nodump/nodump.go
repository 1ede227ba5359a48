// Package nodump makes the process non-dumpable, so that other processes of its user, the
// programs it starts among them (stdio MCP servers), cannot read its environment, which holds
// the Slack and model credentials, or its memory: on Linux, /proc/<pid>/environ, mem and maps
// of a non-dumpable process are readable only with CAP_SYS_PTRACE, and it cannot be traced.
// It also writes no core dump. Elsewhere Set does nothing.
package nodump
