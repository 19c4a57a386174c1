package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// A message taken again before its file was uploaded (WhatsApp delivers
// it again after a crash before its ack) keeps the file of its first take:
// the second take's copy is removed, the first is not touched. Files over
// the cap and past the tenth are left out of the journal.
func TestReceivedFilesSpooledOncePerMessage(t *testing.T) {
	t.Parallel()
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	a := New(Options{Config: ConfigFile{Salt: "s1"}, Journal: j, InboundMediaBytes: 100})
	files := []File{{ContentType: "image/png", Data: []byte("first")}, {ContentType: "video/mp4", Size: 101}}
	for i := 0; i < 11; i++ {
		files = append(files, File{ContentType: "text/plain", Data: []byte("note")})
	}
	msg := Received{Key: "wa:1", Channel: proto.ChannelWhatsApp, From: "+15557654321", To: "+15550100001", Text: "hi", Media: files}
	for range 2 {
		if err := (sink{a}).Take([]Received{msg}, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := j.inbound()
	if err != nil || len(recs) != 1 {
		t.Fatalf("journal: %v %v, want one message", recs, err)
	}
	got := recs[0].Files
	if len(got) != 10 || got[0].ContentType != "image/png" || got[1].ContentType != "text/plain" {
		t.Fatalf("journaled files: %+v, want the image and nine notes (the video is over the cap)", got)
	}
	for _, f := range got {
		if b, err := os.ReadFile(f.Path); err != nil || len(b) == 0 {
			t.Fatalf("spooled file %s: %v", f.Path, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(j.mediaDir(), "*"))
	if len(left) != len(got) {
		t.Fatalf("spool holds %d files, want the %d journaled", len(left), len(got))
	}
}
