package prover

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// TestInteropKeyUpdate makes a real server send KeyUpdate messages:
// crypto/tls servers never initiate one, so it drives `openssl s_server`,
// whose "K" and "k" console commands send KeyUpdate (with and without
// update_requested). The prover's own check and the presentation must
// follow the server's key epochs; the client's answering KeyUpdate changes
// only the client direction, which the notary records blindly.
func TestInteropKeyUpdate(t *testing.T) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("no openssl binary installed")
	}
	ca := notarytest.NewCA(t)
	const host = "keyupdate.test"
	dir := t.TempDir()
	certFile, keyFile := notarytest.WriteFiles(t, dir, ca.Issue(t, notarytest.ECDSA, host))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "s_server", "-accept", "127.0.0.1:0", "-naccept", "1",
		"-cert", certFile, "-key", keyFile, "-tls1_3", "-no_ticket")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "ACCEPT "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("openssl s_server did not start")
	}
	serverLines := make(chan string, 16)
	go func() {
		for sc.Scan() {
			serverLines <- sc.Text()
		}
		close(serverLines)
	}()
	port := addr[strings.LastIndex(addr, ":")+1:]

	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}}
	conn, err := d.DialTLSContext(ctx, "tcp", host+":"+port)
	if err != nil {
		t.Fatal(err)
	}
	tc := conn.(*tls.Conn)
	tc.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(tc)
	waitServer := func(want string) {
		t.Helper()
		for line := range serverLines {
			if strings.Contains(line, want) {
				return
			}
		}
		t.Fatalf("server never printed %q", want)
	}
	readLine := func(want string) {
		t.Helper()
		line, err := br.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != want {
			t.Fatalf("read %q, %v; want %q", line, err, want)
		}
	}
	io.WriteString(tc, "hello from the prover\n")
	waitServer("hello from the prover")
	io.WriteString(stdin, "epoch0\n")
	readLine("epoch0")
	// KeyUpdate(update_requested): the server rekeys and so does the client.
	command(stdin, "K\n")
	io.WriteString(stdin, "epoch1\n")
	readLine("epoch1")
	io.WriteString(tc, "after the client's update\n")
	waitServer("after the client's update")
	// KeyUpdate(update_not_requested).
	command(stdin, "k\n")
	io.WriteString(stdin, "epoch2\n")
	readLine("epoch2")
	tc.Close()

	res, err := d.FinalizeAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.KeyUpdates != 2 {
		t.Fatalf("prover saw %d server KeyUpdates, want 2", r.KeyUpdates)
	}
	checkResult(t, n, r, host, tls.VersionTLS13, r.Parsed.CipherSuite)
	data := disclosed(t, n, r)
	for _, w := range []string{"epoch0\n", "epoch1\n", "epoch2\n"} {
		if !bytes.Contains(data, []byte(w)) {
			t.Fatalf("presentation lacks %q: %q", w, data)
		}
	}
	// A flipped bit in the last epoch's record is caught by the prover's
	// own check, which therefore really opened it under the third key.
	server := serverRecords(r)
	last := len(server) - 1
	for last >= 0 && server[last].Type != mpctls.RecordApplicationData {
		last--
	}
	server[last] = flipBit(server[last], len(server[last].Raw)-1)
	if _, err := checkServer13(r.keys, server); !errors.Is(err, mpctls.ErrDecrypt) {
		t.Fatalf("flipped bit after two KeyUpdates: %v, want ErrDecrypt", err)
	}
}

// command writes an s_server console command and pauses, so that the
// server's next stdin read does not merge it with the data line after it
// (s_server treats a read starting with "k\n" as the command alone).
func command(w io.Writer, c string) {
	io.WriteString(w, c)
	time.Sleep(500 * time.Millisecond)
}
