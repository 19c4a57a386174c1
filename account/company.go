package account

import (
	"context"
	"errors"
	"time"

	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// CompanyPatch changes a company profile; nil fields stay as they are.
type CompanyPatch struct {
	Name, Phone, Address, City, State, Country *string
	// OptOutKeywords switches the STOP/START keywords of inbound SMS.
	OptOutKeywords *bool
	// EmailDevice sets the device of e-mail to SMS (a fingerprint of the
	// company's); "" clears it.
	EmailDevice *string
	// Region sets the country of numbers written without their country
	// code (numplan.CheckRegion); "" clears it.
	Region *string
}

// region is the company's region for numbers written without their
// country code ("" for none).
func (s *Service) region(companyID uint64) (string, error) {
	c, err := s.store.Company(companyID)
	if err != nil {
		return "", mapStoreErr(err, "company")
	}
	return c.Region, nil
}

// Company returns the caller's company.
func (s *Service) Company(_ context.Context, p Principal) (store.Company, error) {
	c, err := s.store.Company(p.CompanyID)
	return c, mapStoreErr(err, "company")
}

// UpdateCompany changes the caller's company. Name and phone cannot be emptied;
// the optional fields are cleared with an empty string.
func (s *Service) UpdateCompany(_ context.Context, p Principal, patch CompanyPatch) (store.Company, error) {
	var v check
	keywords, emailDevice, region := patch.OptOutKeywords, patch.EmailDevice, patch.Region
	// The phone is read in the region the company will have: the one this
	// patch sets when it is valid (else its error comes in its turn).
	stored, err := s.store.Company(p.CompanyID)
	if err != nil {
		return store.Company{}, mapStoreErr(err, "company")
	}
	phoneRegion := stored.Region
	if region != nil {
		if r, err := numplan.CheckRegion(*region); err == nil {
			phoneRegion = r
		}
	}
	patch = CompanyPatch{
		Name:    v.patch(keptAsStored(patch.Name, stored.Name), func(s string) string { return v.required("name", s, maxTextLen) }),
		Phone:   v.patch(patch.Phone, func(s string) string { return v.phone("phone", s, true, phoneRegion) }),
		Address: v.patch(keptAsStored(patch.Address, stored.Address), func(s string) string { return v.optional("address", s, maxTextLen) }),
		City:    v.patch(keptAsStored(patch.City, stored.City), func(s string) string { return v.optional("city", s, maxTextLen) }),
		State:   v.patch(keptAsStored(patch.State, stored.State), func(s string) string { return v.optional("state", s, maxTextLen) }),
		Country: v.patch(keptCountry(patch.Country, stored.Country), func(s string) string { return v.country("country", s) }),
	}
	patch.OptOutKeywords = keywords
	patch.Region = v.patch(region, func(s string) string { return v.region("region", s) })
	if v.err != nil {
		return store.Company{}, v.err
	}
	c, err := s.store.UpdateCompany(p.CompanyID, func(c *store.Company) error {
		setIf(&c.Name, patch.Name)
		setIf(&c.Phone, patch.Phone)
		setIf(&c.Address, patch.Address)
		setIf(&c.City, patch.City)
		setIf(&c.State, patch.State)
		setIf(&c.Country, patch.Country)
		if patch.OptOutKeywords != nil {
			c.OptOutKeywords = patch.OptOutKeywords
		}
		setIf(&c.EmailDevice, emailDevice)
		setIf(&c.Region, patch.Region)
		return nil
	})
	// The store checks the e-mail device in the write that sets it, so a
	// deletion of the device cannot slip between a check and the write.
	if errors.Is(err, store.ErrEmailDeviceGone) {
		return store.Company{}, problem.Invalid("emailDevice", "names no device of the company")
	}
	return c, mapStoreErr(err, "company")
}

// ErrAPIKeyUnreadable is APIKey's answer when the key's stored copy does not
// open under the server's seal key: a 409 conflict of its own, so that a
// caller (the console's settings page) can tell it from any other conflict
// with errors.Is.
var ErrAPIKeyUnreadable = problem.New(problem.Conflict, "This company's API key cannot be shown: its stored copy cannot be read with the server's keys. It still works; rotate it (POST /account/api-key/rotate) to get one that can be shown.")

// APIKey returns the company's current key and when it was made.
func (s *Service) APIKey(_ context.Context, p Principal) (string, time.Time, error) {
	c, err := s.store.Company(p.CompanyID)
	if err != nil {
		return "", time.Time{}, mapStoreErr(err, "company")
	}
	key, err := s.sealer.open(c.APIKeySealed)
	if err != nil {
		// The stored copy does not open under the server's seal key (it was
		// unreadable when simrelay admin rotate-keys ran, which keeps such
		// a copy and names the company): the key still authenticates by
		// its hash, but only a new one can be shown. The company's to put
		// right, not a fault a retry mends.
		s.log.Warn("the company's API key's stored copy does not open", "company_id", c.ID, "err", err)
		return "", time.Time{}, ErrAPIKeyUnreadable
	}
	return key, c.APIKeyCreatedAt, nil
}

// RotateAPIKey replaces the company's key; the old one stops working in the same commit.
func (s *Service) RotateAPIKey(ctx context.Context, p Principal) (string, time.Time, error) {
	key := newAPIKey()
	now := s.now().UTC()
	var oldHash []byte
	_, err := s.store.UpdateCompany(p.CompanyID, func(c *store.Company) error {
		oldHash = c.APIKeyHash
		c.APIKeyHash, c.APIKeySealed, c.APIKeyCreatedAt = tokenHash(key), s.sealer.seal(key), now
		return nil
	})
	// The store no longer knows the old key; neither may the cache.
	s.forgetKey(oldHash)
	if err != nil {
		return "", time.Time{}, mapStoreErr(err, "company")
	}
	s.forgetKeyElsewhere(ctx, oldHash)
	s.log.Info("api key rotated", "company_id", p.CompanyID)
	return key, now, nil
}
