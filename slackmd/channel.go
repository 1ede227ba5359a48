package slackmd

import (
	"regexp"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// channelLink is a Slack channel link the model wrote, <#C024BE7LR|general> or
// <#C024BE7LR>: it pings no one, so mrkdwn keeps it as a link (user and group mentions,
// <@…> and <!…>, stay neutralised).
type channelLink struct {
	ast.BaseInline
	raw []byte
}

var kindChannelLink = ast.NewNodeKind("ChannelLink")

func (n *channelLink) Kind() ast.NodeKind { return kindChannelLink }

func (n *channelLink) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// channelLinkRE matches a channel link: a public (C) or private (G) channel id and an
// optional label (empty for some private channels).
var channelLinkRE = regexp.MustCompile(`^<#[CG][A-Z0-9]{2,}(\|[^<>|\n]*)?>`)

// channelLinkParser parses channel links before the autolink and raw HTML parsers see the "<".
type channelLinkParser struct{}

func (channelLinkParser) Trigger() []byte { return []byte{'<'} }

func (channelLinkParser) Parse(_ ast.Node, block text.Reader, _ parser.Context) ast.Node {
	line, _ := block.PeekLine()
	m := channelLinkRE.Find(line)
	if m == nil {
		return nil
	}
	block.Advance(len(m))
	return &channelLink{raw: append([]byte(nil), m...)}
}
