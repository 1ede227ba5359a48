package followup

import "testing"

// TestAcknowledgement: in a thread the bot takes part in, a message that only thanks or reacts is
// for the people in it: no answer ("You're welcome!" under every "thanks" is noise).
func TestAcknowledgement(t *testing.T) {
	for _, tc := range []struct {
		text   string
		answer bool
	}{
		{"thanks!", false},
		{"Thank you so much 🙏", false},
		{":+1:", false},
		{"👍", false},
		{"great, thanks :raised_hands:", false},
		{"thx", false},
		{"thanks, and what about leaky buckets", true},
		{"thanks?", true},
		{"ok", true}, // may answer the bot's own question
		{"yes", true},
		{"great", false},
		{"great, now do it in Go", true},
		{":thinking_face: why 5?", true},
	} {
		if got := !acknowledgement(tc.text); got != tc.answer {
			t.Errorf("%q: answered %v, want %v", tc.text, got, tc.answer)
		}
	}
}

// TestAcknowledgementOfNoText: a follow-up that is only a forwarded message (Slack's "share", no
// text of its own) has no words, yet is no thanks: it is answered.
func TestAcknowledgementOfNoText(t *testing.T) {
	if acknowledgement("") {
		t.Error(`acknowledgement("") = true: a follow-up with no text (a forwarded message) counts as thanks`)
	}
}

// TestFollowUpQuestionMarkEmojiAnswered: a reply that is just ❓ or :question: (Slack's emoji for
// "I don't follow"), or a fullwidth ？ from a CJK keyboard, asks: it is no thanks.
func TestFollowUpQuestionMarkEmojiAnswered(t *testing.T) {
	for _, text := range []string{"❓", ":question:", ":grey_question:", "？", "thanks？"} {
		if acknowledgement(text) {
			t.Errorf("%q: acknowledgement = true, want it answered (it asks)", text)
		}
	}
}

// TestFollowUpChoiceAnswered: the bot often ends with a choice ("Option A keeps the index, option
// B rebuilds it: which one?"). "A" is an answer to it, not the "a" of "thanks a lot".
func TestFollowUpChoiceAnswered(t *testing.T) {
	for _, text := range []string{"B", "A", "a.", "A!"} {
		if acknowledgement(text) {
			t.Errorf("%q: acknowledgement = true, want it answered (it picks an option)", text)
		}
	}
}

// TestFollowUpChoiceWithPraiseAnswered: a pick often comes with a word of praise or thanks ("perfect,
// A", "great, a", "thanks! A"): the "a" still picks an option (the "a" of "thanks a lot" comes with
// "lot"), so the message asks for the next step and is answered.
func TestFollowUpChoiceWithPraiseAnswered(t *testing.T) {
	for _, text := range []string{"perfect, A", "great, a", "cool A", "thanks! A", "nice, A please"} {
		if acknowledgement(text) {
			t.Errorf("%q: acknowledgement = true, want it answered (it picks an option)", text)
		}
	}
}
