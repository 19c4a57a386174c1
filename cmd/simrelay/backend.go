package main

import (
	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/web"
	"github.com/simrelay/simrelay/webhook"
)

// backend is the server's store, whichever backend keeps it.
type backend = store.Backend

// Every domain's store interface is a part of the backend.
var (
	_ account.Store     = backend(nil)
	_ billing.Store     = backend(nil)
	_ channel.Store     = backend(nil)
	_ device.Store      = backend(nil)
	_ mail.Outbox       = backend(nil)
	_ media.Store       = backend(nil)
	_ sms.Store         = backend(nil)
	_ webhook.Store     = backend(nil)
	_ httpapi.Backuper  = backend(nil)
	_ httpapi.Analytics = backend(nil)
	_ web.Analytics     = backend(nil)
)
