package account

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// An API key whose stored copy does not open is its own error,
// ErrAPIKeyUnreadable (409 conflict), so that a caller can tell it from any
// other conflict: the console shows this one as "cannot be shown, rotate it"
// and nothing else so.
func TestAPIKeyUnreadableIsItsOwnError(t *testing.T) {
	t.Parallel()
	s := newLoginsService(t, Config{})
	co, _, _, err := s.CreateCompany("Acme", OwnerInput{Email: "seal@acme.test", Password: "Correct1horse"})
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{CompanyID: co.ID, Role: store.RoleAdmin, ViaAPIKey: true}
	if _, _, err := s.APIKey(context.Background(), p); err != nil {
		t.Fatalf("APIKey with a readable copy: %v", err)
	}
	if _, err := s.store.UpdateCompany(co.ID, func(c *store.Company) error {
		c.APIKeySealed = []byte("not a sealed key")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.APIKey(context.Background(), p)
	if !errors.Is(err, ErrAPIKeyUnreadable) {
		t.Fatalf("APIKey with an unreadable copy: %v, want ErrAPIKeyUnreadable", err)
	}
	if pe, ok := problem.As(err); !ok || pe.Status() != http.StatusConflict {
		t.Fatalf("APIKey with an unreadable copy: %v, want a 409 problem", err)
	}
	// Other conflicts are not it.
	for _, other := range []error{mapStoreErr(store.ErrLastAdmin, "company"), mapStoreErr(store.ErrConflict, "company"), problem.New(problem.Conflict, "another")} {
		if errors.Is(other, ErrAPIKeyUnreadable) {
			t.Errorf("%v is ErrAPIKeyUnreadable, want another conflict", other)
		}
	}
}
