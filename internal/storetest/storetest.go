// Package storetest gives the tests of the packages above the store a real
// store file to work on: opened in the test's temporary directory, closed
// when the test ends, with a company when the test needs one.
package storetest

import (
	"testing"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
)

// Open opens a new store in t.TempDir and closes it at the test's end.
func Open(t testing.TB) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Company stores a company named name with an admin whose address is email.
func Company(t testing.TB, st *boltstore.Store, name, email string) store.Company {
	t.Helper()
	c := store.Company{Name: name, APIKeyHash: []byte("key of " + name)}
	if err := st.CreateCompany(&c, &store.User{Email: email, PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	return c
}
