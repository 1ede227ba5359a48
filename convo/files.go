package convo

import (
	"github.com/llmbot/llmbot/llm"
	"github.com/slack-go/slack"
)

// FileContent is what the model is given of one shared file. The caller reads it (downloads,
// scales pictures, caps text) and Build places it in its message, within the budget.
type FileContent struct {
	// Text is a text file's content, already capped (ending with a note when cut).
	Text string
	// Image is a picture as a data: URL, and Tokens its estimated cost to the model.
	Image  string
	Tokens int
	// Note says why the file is not read ("too large", "PDFs are not read", ...); the model is
	// told it next to the file's name.
	Note string
}

// Notes on files whose contents are not in the request.
const (
	filesLeftOutNote = "[the contents of this message's files are left out: the conversation is too long]"
	imageAltSuffix   = ": this model cannot see images, so it is not shown]"
)

// costed is a message and its estimated tokens; files counts the files whose contents it carries,
// and foreign says what in it is not the asker's words (see Result.Foreign).
type costed struct {
	msg     llm.Message
	tokens  int
	files   int
	foreign string
}

func (b *builder) costed(m llm.Message) costed { return costed{msg: m, tokens: b.cost(m, 0)} }

// cost estimates m: its text as EstimateTokens does, plus its pictures' tokens.
func (b *builder) cost(m llm.Message, images int) int {
	return EstimateTokens(m.Text()) + images
}

// withFiles adds to m (the message of s) what was read of s's files, or, when files is false and
// something was read, the note that it is left out. A file's contents are fenced as data from the
// file, whoever shared it; a note on a file names it quoted, on one line.
func (b *builder) withFiles(m llm.Message, s slack.Message, files bool) costed {
	var parts []llm.Part
	images, read := 0, 0
	for _, f := range s.Files {
		c, ok := b.opt.Files[f.ID]
		if !ok {
			continue
		}
		name := quote(fileName(f))
		src := "the file " + name + " shared by " + b.sharer(s)
		switch {
		case c.Note != "":
			parts = append(parts, llm.Part{Type: llm.PartText, Text: "[" + b.fence.Neutral(name) + ": " + c.Note + "]"})
			continue
		case !files:
			read++
			continue
		case c.Image != "":
			parts = append(parts, llm.Part{Type: llm.PartText, Text: b.fence.Open(src)},
				llm.Part{Type: llm.PartImage, ImageURL: c.Image, Alt: "[" + b.fence.Neutral(name) + imageAltSuffix},
				llm.Part{Type: llm.PartText, Text: b.fence.Close()})
			images += c.Tokens
		case c.Text != "":
			parts = append(parts, llm.Part{Type: llm.PartText, Text: b.fence.Wrap(src, c.Text)})
		default:
			continue
		}
		read++
	}
	var foreign string
	if !files && read > 0 {
		parts = append(parts, llm.Part{Type: llm.PartText, Text: filesLeftOutNote})
		read = 0
	} else if read > 0 {
		foreign = ForeignFile
	}
	m.Parts = parts
	return costed{msg: m, tokens: b.cost(m, images), files: read, foreign: foreign}
}

// fileName is how a file is named to the model.
func fileName(f slack.File) string {
	switch {
	case f.Name != "":
		return f.Name
	case f.Title != "":
		return f.Title
	}
	return "a file"
}
