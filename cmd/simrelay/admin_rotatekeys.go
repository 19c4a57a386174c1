package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
	"github.com/simrelay/simrelay/web"
)

const rotateKeysUsage = "Usage: simrelay admin rotate-keys [--data-dir D | --database-url URL]\n\n" +
	"Replaces the server's own keys, kept in the store, with fresh random ones, all in one\n" +
	"transaction: the key that signs access tokens, the key that seals each company's API key\n" +
	"(every sealed key is re-sealed under the new one, the keys themselves unchanged; a sealed\n" +
	"key that did not open before is kept as it is, its company named), the keys\n" +
	"that sign media links and the console's notices, the key of the failed sign-ins' digests, the\n" +
	"key that signs the sign-ins' device cookies and, in a cluster, the key of the settings'\n" +
	"digests. Run it after a backup or a pg_dump leaked.\n" +
	"Every server on the store must be stopped: the embedded store is refused while one holds it,\n" +
	"a database while a node's beat is less than 10 s old. Prints the keys it replaced (their\n" +
	"names, never their values) and what users will see (docs/security.md).\n\n"

// serverKey is a server secret that rotate-keys replaces: what it keys,
// and what replacing it costs users.
type serverKey struct {
	name, does, costs string
}

// serverKeys are the store secrets that sign or key something, each of
// them read by the server at its start (account.New, serve's media key,
// the console's flash signer, a cluster's settings). The cluster's id on
// the bus (cluster.ClusterIDSecret) is not among them: it keys nothing, it
// only tells clusters on one NATS server apart, and every message on the
// bus shows it in its subject.
var serverKeys = []serverKey{
	{account.JWTSecret, "signs access tokens",
		"access tokens issued before are refused (401); a client takes a new one with its refresh token (POST /auth/refresh), or signs in again; console sessions go on"},
	{account.SealSecret, "seals each company's API key in the store",
		"nothing: each company's API key was re-sealed under the new key and keeps working. A leaked copy held the old key, so the API keys were readable from it: each company should rotate its own (POST /account/api-key/rotate)"},
	{media.KeySecret, "signs media links",
		"media links handed out before (webhook payloads, API answers) are refused (403): ask for the message again for a new link"},
	{web.FlashSecret, "signs the console's notices",
		"a notice in a console redirect under way is not shown"},
	{account.LoginSecret, "keys the digests that count failed sign-ins by address, client and device cookie",
		"failed sign-ins are counted from zero again"},
	{account.DeviceSecret, "signs the device cookies of successful sign-ins",
		"device cookies issued before are ignored: until each user signs in once more, their sign-ins are throttled like any client's (docs/security.md, device cookies)"},
	{cluster.DigestSecret, "keys the digests of the settings a cluster's nodes compare",
		"nothing: every node starts again with the new key"},
}

// adminRotateKeys is simrelay admin rotate-keys.
func adminRotateKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("rotate-keys", stderr)
	fs.Usage = flagUsage(fs, rotateKeysUsage)
	if err := parseFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	where.existing = true
	st, err := openBackend(ctx, *where)
	if errors.Is(err, boltstore.ErrLocked) {
		return fmt.Errorf("%w; nothing was replaced: the server's keys are read at its start, so rotate them with it stopped", err)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	names := make([]string, len(serverKeys))
	for i, k := range serverKeys {
		names[i] = k.name
	}
	replaced, resealed, unopened, err := st.RotateSecrets(names, account.ResealAPIKey)
	if errors.Is(err, postgres.ErrNodesLive) {
		return fmt.Errorf("%w; nothing was replaced", err)
	}
	if err != nil {
		return fmt.Errorf("nothing was replaced: %w", err)
	}
	if len(replaced) == 0 {
		fmt.Fprintf(stdout, "%s holds none of the server's keys yet (a server makes them at its first start): nothing was replaced.\n", where.where())
		return nil
	}
	fmt.Fprintf(stdout, "Replaced in %s, in one transaction:\n", where.where())
	for _, k := range serverKeys {
		if slices.Contains(replaced, k.name) {
			fmt.Fprintf(stdout, "  %-16s %s\n", k.name, k.does)
		}
	}
	if slices.Contains(replaced, account.SealSecret) {
		whose := fmt.Sprintf("%d companies' API keys", resealed)
		if resealed == 1 {
			whose = "1 company's API key"
		}
		fmt.Fprintf(stdout, "Re-sealed %s under the new %s; the keys themselves are unchanged.\n", whose, account.SealSecret)
	}
	for _, c := range unopened {
		fmt.Fprintf(stdout, "Company %d (%q): its API key's stored copy could not be opened before this rotation and was kept as it is;"+
			" the key still works, but GET /account/api-key fails until the company rotates its key (POST /account/api-key/rotate).\n", c.ID, c.Name)
	}
	var later []string
	for _, k := range serverKeys {
		if !slices.Contains(replaced, k.name) && k.name != cluster.DigestSecret {
			later = append(later, k.name)
		}
	}
	if len(later) > 0 {
		fmt.Fprintf(stdout, "Not in the store yet (a server makes each at its first use): %s.\n", strings.Join(later, ", "))
	}
	fmt.Fprintln(stdout, "\nWhat users will see once the servers start again:")
	for _, k := range serverKeys {
		if slices.Contains(replaced, k.name) {
			fmt.Fprintf(stdout, "  %s: %s.\n", k.name, k.costs)
		}
	}
	fmt.Fprint(stdout, leakedCompanySecrets)
	return nil
}

// leakedCompanySecrets is what a leaked copy held beside the server's keys
// that no rotation of the operator's can replace: each company's webhook
// signing secret, which the store keeps as it is (the server signs with
// it), so that whoever holds the copy can sign deliveries that a
// company's receiver takes for the server's.
const leakedCompanySecrets = "\nA leaked copy also held each company's webhook signing secret, kept in the store as it is:\n" +
	"whoever holds it can sign deliveries that the company's receiver takes for this server's.\n" +
	"Each company should rotate it too (POST /webhooks/signing-secret/rotate, or the console),\n" +
	"beside its API key (POST /account/api-key/rotate).\n"
