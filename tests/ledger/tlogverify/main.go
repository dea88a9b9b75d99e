// Command tlogverify checks the ledger's transparency log with the Go checksum database's own
// verifiers (golang.org/x/mod/sumdb/note and sumdb/tlog), independently of the Python code that
// produced it: tests/ledger/test_tlog_go.py builds it (GOPATH mode, Debian's
// golang-golang-x-mod-dev, no network) and feeds it one JSON document on stdin:
//
//	{"verifier_key": "<name>+<hash>+<base64>",
//	 "notes": ["<a C2SP signed note: a checkpoint>", ...],
//	 "inclusion": [{"tree_size", "leaf_index", "leaf_data" (base64: the leaf's data, whose
//	                RFC 6962 record hash Go computes), "leaf_hash" (optional, base64),
//	                "audit_path": [base64, ...], "root_hash" (base64)}, ...],
//	 "consistency": [{"from", "to", "proof": [base64, ...], "from_root", "to_root"}, ...]}
//
// Each note is opened with note.Open (its Ed25519 signature by the verifier key) and its text read
// as a checkpoint (c2sp.org/tlog-checkpoint: origin, size, base64 root, extension lines); each
// inclusion is checked with tlog.CheckRecord and each consistency with tlog.CheckTree. A root
// named by a proof whose tree size a note states must be the note's root. It prints a JSON report
// and exits 0, or prints the first failure on stderr and exits 1 (2 for unreadable input).
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	TreeSize  int64    `json:"tree_size"`
	LeafIndex int64    `json:"leaf_index"`
	LeafData  string   `json:"leaf_data"`
	LeafHash  string   `json:"leaf_hash"`
	AuditPath []string `json:"audit_path"`
	RootHash  string   `json:"root_hash"`
}

type consistency struct {
	From     int64    `json:"from"`
	To       int64    `json:"to"`
	Proof    []string `json:"proof"`
	FromRoot string   `json:"from_root"`
	ToRoot   string   `json:"to_root"`
}

type input struct {
	VerifierKey string        `json:"verifier_key"`
	Notes       []string      `json:"notes"`
	Inclusion   []inclusion   `json:"inclusion"`
	Consistency []consistency `json:"consistency"`
}

type checkpoint struct {
	Origin     string   `json:"origin"`
	Size       int64    `json:"size"`
	Root       string   `json:"root"`
	Extensions []string `json:"extensions"`
	Signer     string   `json:"signer"`
	KeyHash    string   `json:"key_hash"`
}

type report struct {
	Verifier    string       `json:"verifier"`
	Checkpoints []checkpoint `json:"checkpoints"`
	Inclusion   int          `json:"inclusion_proofs_verified"`
	Consistency int          `json:"consistency_proofs_verified"`
	BoundToNote int          `json:"roots_bound_to_a_note"`
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "tlogverify: "+format+"\n", args...)
	os.Exit(code)
}

func hash(what, b64 string) tlog.Hash {
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(raw) != tlog.HashSize {
		fail(1, "%s: %q is not the base64 of a %d-byte hash", what, b64, tlog.HashSize)
	}
	var h tlog.Hash
	copy(h[:], raw)
	return h
}

func hashes(what string, b64s []string) []tlog.Hash {
	out := make([]tlog.Hash, len(b64s))
	for i, s := range b64s {
		out[i] = hash(fmt.Sprintf("%s[%d]", what, i), s)
	}
	return out
}

// parseCheckpoint reads a checkpoint's text (c2sp.org/tlog-checkpoint).
func parseCheckpoint(text string) (checkpoint, error) {
	if !strings.HasSuffix(text, "\n") {
		return checkpoint{}, fmt.Errorf("the text does not end in a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return checkpoint{}, fmt.Errorf("fewer than three lines (origin, size, root hash)")
	}
	for i, line := range lines {
		if line == "" {
			return checkpoint{}, fmt.Errorf("line %d is empty", i+1)
		}
	}
	size := lines[1]
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != size {
		return checkpoint{}, fmt.Errorf("size line %q is not a decimal number", size)
	}
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return checkpoint{}, fmt.Errorf("root line %q is not the base64 of a SHA-256 hash", lines[2])
	}
	return checkpoint{Origin: lines[0], Size: n, Root: lines[2], Extensions: append([]string{}, lines[3:]...)}, nil
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(2, "reading stdin: %v", err)
	}
	var in input
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&in); err != nil {
		fail(2, "the input is not the JSON document expected: %v", err)
	}

	out := report{Checkpoints: []checkpoint{}}
	roots := map[int64]string{} // tree size -> root, as the verified notes state it
	if len(in.Notes) > 0 || in.VerifierKey != "" {
		verifier, err := note.NewVerifier(in.VerifierKey)
		if err != nil {
			fail(1, "note.NewVerifier(%q): %v", in.VerifierKey, err)
		}
		out.Verifier = verifier.Name()
		for i, text := range in.Notes {
			opened, err := note.Open([]byte(text), note.VerifierList(verifier))
			if err != nil {
				fail(1, "notes[%d]: note.Open: %v", i, err)
			}
			cp, err := parseCheckpoint(opened.Text)
			if err != nil {
				fail(1, "notes[%d]: not a checkpoint: %v", i, err)
			}
			if cp.Origin != verifier.Name() {
				fail(1, "notes[%d]: the checkpoint's origin %q is not the key's name %q", i, cp.Origin, verifier.Name())
			}
			if known, ok := roots[cp.Size]; ok && known != cp.Root {
				fail(1, "notes[%d]: two signed notes state different roots for the tree of %d", i, cp.Size)
			}
			roots[cp.Size] = cp.Root
			cp.Signer = opened.Sigs[0].Name
			cp.KeyHash = fmt.Sprintf("%08x", opened.Sigs[0].Hash)
			out.Checkpoints = append(out.Checkpoints, cp)
		}
	}

	bound := func(what string, size int64, root string) {
		if known, ok := roots[size]; ok {
			if known != root {
				fail(1, "%s: root %s is not the root %s the signed note of the tree of %d states", what, root, known, size)
			}
			out.BoundToNote++
		}
	}

	for i, p := range in.Inclusion {
		what := fmt.Sprintf("inclusion[%d] (leaf %d of %d)", i, p.LeafIndex, p.TreeSize)
		data, err := base64.StdEncoding.Strict().DecodeString(p.LeafData)
		if err != nil {
			fail(1, "%s: leaf_data is not base64: %v", what, err)
		}
		leaf := tlog.RecordHash(data)
		if p.LeafHash != "" && hash(what+" leaf_hash", p.LeafHash) != leaf {
			fail(1, "%s: leaf_hash %s is not tlog.RecordHash of the leaf data (%s)", what, p.LeafHash, leaf)
		}
		bound(what, p.TreeSize, p.RootHash)
		root := hash(what+" root_hash", p.RootHash)
		if err := tlog.CheckRecord(hashes(what+" audit_path", p.AuditPath), p.TreeSize, root, p.LeafIndex, leaf); err != nil {
			fail(1, "%s: tlog.CheckRecord: %v", what, err)
		}
		out.Inclusion++
	}

	for i, p := range in.Consistency {
		what := fmt.Sprintf("consistency[%d] (%d to %d)", i, p.From, p.To)
		bound(what+" from_root", p.From, p.FromRoot)
		bound(what+" to_root", p.To, p.ToRoot)
		proof := hashes(what+" proof", p.Proof)
		if err := tlog.CheckTree(proof, p.To, hash(what+" to_root", p.ToRoot), p.From, hash(what+" from_root", p.FromRoot)); err != nil {
			fail(1, "%s: tlog.CheckTree: %v", what, err)
		}
		out.Consistency++
	}

	encoded, err := json.Marshal(out)
	if err != nil {
		fail(2, "encoding the report: %v", err)
	}
	fmt.Println(string(encoded))
}
