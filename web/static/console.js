// simrelay console: forms post through fetch so that errors show beside
// their field and nothing typed is lost; the pages that show messages or
// devices' badges listen to one Server-Sent Events stream. Plain
// JavaScript, no build step.
(function () {
  "use strict";
  var body = document.body;
  var csrf = body.getAttribute("data-csrf") || "";
  // ms reads one of the server's timers from the body (web.PageTimers), in
  // milliseconds; a page without it takes the default.
  var ms = function (name, def) { var v = parseInt(body.getAttribute(name), 10); return v > 0 ? v : def; };
  var pairingPoll = ms("data-pairing-poll", 1500); // how often a pairing panel asks
  var pairingLink = ms("data-pairing-link", 10000); // how long it waits for a registered phone's link
  var liveLost = ms("data-live-lost", 6000); // a broken stream's wait before it says so
  var banner = document.getElementById("banner");

  function say(kind, text, linkText, linkHref) {
    if (!banner) { return; }
    banner.className = "banner " + kind;
    banner.textContent = text;
    if (linkText) {
      var a = document.createElement("a");
      a.href = linkHref; a.target = "_blank"; a.rel = "noopener"; a.textContent = linkText;
      banner.appendChild(document.createTextNode(" "));
      banner.appendChild(a);
    }
    banner.hidden = false;
  }

  // A page an action led to (the address's ok= or err=, which the banner
  // shows when signed for this browser) moves focus to its outcome, as a
  // refused fetch does (showProblem): the field a refusal names, whose
  // message describes it, or else the banner. Focus stayed at the top of
  // the new page, and a live region already filled when the page loads is
  // not read, so a screen reader said nothing of what the action did.
  (function () {
    var q = new URLSearchParams(location.search);
    if (!banner || banner.hidden || !(q.has("ok") || q.has("err"))) { return; }
    var name = q.get("field");
    if (name) {
      var slots = document.querySelectorAll('[data-error-for="' + CSS.escape(name) + '"]');
      for (var i = 0; i < slots.length; i++) {
        var f = slots[i].textContent && slots[i].closest("form");
        var input = f && f.querySelector('[name="' + CSS.escape(name) + '"]');
        if (input) { input.setAttribute("aria-invalid", "true"); input.focus(); return; }
      }
    }
    banner.setAttribute("tabindex", "-1");
    banner.focus({preventScroll: !!location.hash});
  })();

  // Moments are written one way across the console, as the server writes
  // them: "2026-11-26 14:33 UTC". The person's own time shows on hover and
  // beside the one field where they type a local time.
  // isolated holds a text a user, a phone or a stranger wrote, set as text,
  // in a <bdi>: its direction controls stay inside it (console.css).
  function isolated(text) {
    var b = document.createElement("bdi");
    b.textContent = text;
    return b;
  }
  function span(cls) { var s = document.createElement("span"); s.className = cls; return s; }
  // put appends each part to el, a string as text (never as markup), and returns el.
  function put(el, parts) {
    parts.forEach(function (p) { el.appendChild(typeof p === "string" ? document.createTextNode(p) : p); });
    return el;
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function utcText(iso) {
    var d = new Date(iso);
    if (!iso || isNaN(d.getTime())) { return iso || ""; }
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + " UTC";
  }
  function localText(d) {
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" + pad(d.getMinutes());
  }
  var zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { zone = ""; }
  function timeEl(iso) {
    var t = document.createElement("time");
    t.dateTime = iso; t.textContent = utcText(iso);
    localTitle(t);
    return t;
  }
  function localTitle(t) {
    var d = new Date(t.dateTime);
    if (!isNaN(d.getTime())) { t.title = localText(d) + " your time" + (zone ? " (" + zone + ")" : ""); }
  }
  document.querySelectorAll("time[datetime]").forEach(localTitle);
  // A working-hours box starts in the person's own time zone.
  document.querySelectorAll("[data-default-zone]").forEach(function (input) {
    if (!input.value && zone) { input.value = zone; }
  });
  document.querySelectorAll("[data-local-zone]").forEach(function (hint) {
    var input = document.getElementById(hint.id.replace(/-zone$/, ""));
    if (!input) { return; }
    // Without this script the time is read as UTC, and the label says so;
    // the script turns the person's own time into UTC when the form is sent.
    var reads = document.getElementById(input.id + "-reads");
    if (reads) { reads.textContent = "in your local time"; }
    var show = function () {
      var d = input.value ? new Date(input.value) : null;
      var where = "Your time zone" + (zone ? ": " + zone : " is your device's") + ".";
      hint.textContent = d && !isNaN(d.getTime()) ? where + " " + localText(d) + " your time is " + utcText(d.toISOString()) + "." :
        where + " Times on this page are in UTC.";
    };
    input.addEventListener("input", show);
    show();
  });

  function clearErrors(form) {
    form.querySelectorAll(".ferr").forEach(function (el) { el.textContent = ""; });
    form.querySelectorAll("[aria-invalid]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
  }

  // The session ended while the page was open (idle for 12 hours, signed
  // out elsewhere). The page keeps what was typed and asks the person to
  // sign in again in another tab; its forms and its own token belong to the
  // ended session, so before the next action it takes the new session's
  // (renew), and what stopped (the live view, the pairing panel) starts again.
  var me = body.getAttribute("data-user") || "";
  var expired = false;
  var stopped = [];
  function sessionExpired(resume) {
    expired = true;
    if (resume && stopped.indexOf(resume) < 0) { stopped.push(resume); }
    say("err", "Your session has expired. Sign in again in a new tab, then come back and send again: what you typed is kept here.",
      "Sign in", "/console/signin");
  }

  // renew answers, once the session has ended (or, with force, whenever
  // asked), "ok" when the browser holds a session of the page's own user
  // (the page then carries its token), "out" while it holds none, "other"
  // when it holds another user's (said here: nothing typed for one user is
  // sent as another) and "down" when the server cannot be reached. Before
  // an ended session, unforced, it is "ok" at once.
  var renewing = null;
  function renew(force) {
    if (!expired && !force) { return Promise.resolve("ok"); }
    if (renewing) { return renewing; }
    renewing = fetch("/console/session", {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) {
        if (!r.ok) { return "out"; }
        return r.json().then(function (s) {
          if (String(s.user) !== me) {
            say("err", "This browser is now signed in as another user. Reload the page to go on as them: nothing typed here was sent.");
            return "other";
          }
          var changed = s.csrf !== csrf;
          if (changed) {
            csrf = s.csrf;
            body.setAttribute("data-csrf", csrf);
            document.querySelectorAll('input[name="csrf"]').forEach(function (i) { i.value = csrf; });
          }
          if (expired || changed) { say("ok", "You are signed in again."); }
          expired = false;
          var again = stopped; stopped = [];
          again.forEach(function (f) { f(); });
          return "ok";
        });
      })
      .catch(function () { return "down"; })
      .finally(function () { renewing = null; });
    return renewing;
  }
  // Coming back to the tab after signing in elsewhere brings it back to life.
  window.addEventListener("focus", function () { if (expired) { renew(); } });
  document.addEventListener("visibilitychange", function () { if (expired && !document.hidden) { renew(); } });

  function showProblem(form, p) {
    if (p.error === "unauthorized") { sessionExpired(); return; }
    say("err", p.message || "Something went wrong.");
    if (!p.field) { return; }
    var slot = form.querySelector('[data-error-for="' + CSS.escape(p.field) + '"]');
    if (slot) { slot.textContent = p.message; }
    var input = form.querySelector('[name="' + CSS.escape(p.field) + '"]');
    if (input) { input.setAttribute("aria-invalid", "true"); input.focus(); }
  }

  function post(form) {
    var data = new FormData(form);
    // A date-time field holds the person's local time: the server gets it in UTC.
    form.querySelectorAll('input[type="datetime-local"]').forEach(function (i) {
      var d = i.value ? new Date(i.value) : null;
      if (d && !isNaN(d.getTime())) { data.set(i.name, d.toISOString()); }
    });
    return fetch(form.action, {
      method: "POST",
      credentials: "same-origin",
      headers: {"Accept": "application/json", "X-CSRF-Token": csrf, "Content-Type": "application/x-www-form-urlencoded"},
      body: new URLSearchParams(data)
    });
  }

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if ((form.method || "").toLowerCase() !== "post") { return; }
    ev.preventDefault();
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { return; }
    clearErrors(form);
    var buttons = form.querySelectorAll("button[type=submit]");
    buttons.forEach(function (b) { b.disabled = true; });
    var send = function () {
      return post(form).then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (b) { return {ok: r.ok, status: r.status, body: b}; });
      });
    };
    var notSent = function (state) { return {ok: false, body: state === "out" ? {error: "unauthorized"} : null}; };
    var token;
    // Sign-out needs no session: one already ended is signed out too.
    (form.classList.contains("signout") ? Promise.resolve("ok") : renew()).then(function (state) {
      if (state === "down") { throw new Error("unreachable"); }
      if (state !== "ok") { return notSent(state); }
      token = csrf;
      return send();
    }).then(function (r) {
      // A 403 changed nothing. If it refused the token because the browser
      // signed in again (elsewhere, unseen here), send once more with the
      // new session's token, when it is the same user's.
      if (r.status !== 403) { return r; }
      return renew(true).then(function (state) {
        if (state === "ok" && csrf !== token) { return send(); }
        return state === "other" ? notSent(state) : r;
      });
    }).then(function (r) {
      if (!r.ok) { if (r.body) { showProblem(form, r.body); } return; }
      if (form.hasAttribute("data-stay")) { sent(form, r.body); return; }
      var to = r.body.redirect || location.pathname + location.search;
      if (r.body.notice) {
        var u = new URL(to, location.href);
        u.searchParams.set("ok", r.body.notice);
        u.searchParams.set("sig", r.body.sig || "");
        u.searchParams.delete("err"); u.searchParams.delete("field");
        to = u.pathname + u.search + u.hash;
      }
      location.assign(to);
    }).catch(function () {
      say("err", "The server could not be reached. What you typed is kept; try again in a moment.");
    }).finally(function () {
      buttons.forEach(function (b) { b.disabled = false; });
    });
  });

  // A list that opens its choice at once (the messages page's device) does
  // so for a choice made with the pointer only: with the keyboard, each
  // arrow key is a change, and it loaded the next device's page before the
  // person reached the one they wanted; they choose, then press the form's
  // button (WCAG 3.2.2, on input).
  document.querySelectorAll("select[data-autosubmit]").forEach(function (s) {
    var keys = false;
    s.addEventListener("keydown", function () { keys = true; });
    s.addEventListener("pointerdown", function () { keys = false; });
    s.addEventListener("change", function () { if (!keys) { s.form.submit(); } });
  });

  document.querySelectorAll("[data-copy]").forEach(function (b) {
    b.addEventListener("click", function () {
      var el = document.getElementById(b.getAttribute("data-copy"));
      if (el && navigator.clipboard) {
        navigator.clipboard.writeText(el.textContent).then(function () { say("ok", "Copied."); });
      }
    });
  });

  // Devices: the pairing panel becomes the new device once it registers.
  var pairing = document.getElementById("pairing");
  if (pairing) {
    // The page says to reload it, for a browser without this script; with
    // it, the panel turns into the device by itself.
    var waiting = document.getElementById("pairing-status");
    if (waiting) { waiting.textContent = "Waiting for the phone to register… This panel turns into the device when it does."; }
    var known = (pairing.getAttribute("data-known") || "").split(" ").filter(Boolean);
    // expiredPairing: no phone can register with the code any more, so the
    // panel stops asking and offers a new code (the page's own form).
    var expiredPairing = function () {
      var text = "This pairing code expired before a phone registered with it. Ask for a new one.";
      pairing.setAttribute("data-expired", "true");
      var qr = pairing.querySelector("svg.qr");
      if (qr) { qr.remove(); }
      var wait = document.getElementById("pairing-wait");
      wait.textContent = "";
      var p = document.createElement("p");
      p.textContent = text;
      var f = document.createElement("form");
      f.method = "post"; f.action = "/console/pairing"; f.className = "inline";
      var i = document.createElement("input");
      i.type = "hidden"; i.name = "csrf"; i.value = csrf;
      var b = document.createElement("button");
      b.type = "submit"; b.textContent = "Pair a phone";
      f.appendChild(i); f.appendChild(b);
      wait.appendChild(p); wait.appendChild(f);
      say("err", text);
    };
    // linking says whether the panel still waits for the link of d, a
    // phone that registered with its code and is not online yet: for
    // pairingLink from when the panel first saw it registered, saying so.
    var registeredAt = 0;
    var linking = function (d) {
      if (!registeredAt) {
        registeredAt = Date.now();
        var status = document.getElementById("pairing-status");
        if (status) { status.textContent = ""; put(status, [isolated(d.name), " registered; waiting for it to connect…"]); }
      }
      return Date.now() - registeredAt < pairingLink;
    };
    var poll = function () {
      fetch("/console/devices/state?pairing=" + encodeURIComponent(pairing.getAttribute("data-code") || ""),
        {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) {
          if (r.redirected || r.status === 401) { sessionExpired(poll); return null; }
          if (!r.ok) {
            // Refused for now (the store out of reach): say why, ask again.
            return refused(r, "Still waiting for the phone, but the devices could not be read").then(function () {
              setTimeout(poll, 3000);
              return null;
            });
          }
          return r.json();
        })
        .then(function (b) {
          if (!b) { return; }
          var fresh = b.devices.filter(function (d) { return known.indexOf(d.fingerprint) < 0; });
          if (fresh.length) {
            // A phone links right after it registers: the panel waits for
            // the link (at most pairingLink), so that the device it turns
            // into shows the phone online, not "offline" until a reload.
            if (!fresh[0].online && linking(fresh[0])) { setTimeout(poll, pairingPoll); return; }
            location.assign("/console/devices?ok=" + encodeURIComponent(fresh[0].paired) + "&sig=" + encodeURIComponent(fresh[0].paired_sig) + "#device-" + fresh[0].fingerprint);
            return;
          }
          if (b.pairing === "expired") { expiredPairing(); return; }
          setTimeout(poll, pairingPoll);
        })
        .catch(function () { say("err", "The server could not be reached; still waiting for the phone."); setTimeout(poll, 3000); });
    };
    // A page opened with a code that no longer works says so already.
    if (pairing.getAttribute("data-expired") !== "true") { setTimeout(poll, pairingPoll); }
  }

  // Messages: the thread and the conversations follow the live stream.
  var chat = document.getElementById("chat");
  var thread = document.getElementById("thread");

  function msgEl(m) {
    var li = document.createElement("li");
    li.className = "msg " + m.direction;
    li.setAttribute("data-id", m.id);
    var p = document.createElement("p");
    p.className = "text"; p.dir = "auto"; p.textContent = m.text;
    var meta = document.createElement("p");
    meta.className = "meta";
    meta.appendChild(timeEl(m.created_at));
    meta.appendChild(document.createTextNode(" · " + m.sim_slot));
    if (m.direction === "outbound") {
      meta.appendChild(document.createTextNode(" · "));
      var st = document.createElement("span");
      st.className = "status"; st.setAttribute("data-status", m.status); st.textContent = m.status;
      meta.appendChild(st);
      if (m.status === "scheduled" && m.send_at) {
        var when = document.createElement("span");
        when.className = "when"; when.textContent = " for ";
        when.appendChild(timeEl(m.send_at));
        meta.appendChild(when);
      }
      if (m.status === "queued" && m.held_until) {
        var held = document.createElement("span");
        held.className = "when"; held.textContent = " outside its hours, until ";
        held.appendChild(timeEl(m.held_until));
        meta.appendChild(held);
      }
      if (m.error) { meta.appendChild(put(span("error"), [" ", isolated(m.error)])); }
    }
    li.appendChild(p); li.appendChild(meta);
    if (m.direction === "outbound" && (m.status === "scheduled" || m.status === "queued") && m.queue_id) {
      li.appendChild(cancelForm(m.queue_id));
    }
    return li;
  }

  // cancelForm takes back a scheduled or queued SMS (the submit handler
  // above posts it like every form).
  function cancelForm(queueID) {
    var f = document.createElement("form");
    f.method = "post"; f.action = "/console/messages/cancel"; f.className = "cancel";
    f.setAttribute("data-stay", "");
    [["csrf", csrf], ["queue_id", queueID]].forEach(function (kv) {
      var i = document.createElement("input");
      i.type = "hidden"; i.name = kv[0]; i.value = kv[1];
      f.appendChild(i);
    });
    var b = document.createElement("button");
    b.type = "submit"; b.className = "link"; b.textContent = "Cancel";
    f.appendChild(b);
    return f;
  }

  // Statuses only move forward; events and answers may arrive out of order.
  var order = {scheduled: 0, queued: 1, sending: 2, sent: 3, delivered: 4, failed: 4, expired: 4, canceled: 4};
  function rank(x) {
    if (x.nodeType) {
      var st = x.querySelector(".status");
      return st ? (order[st.getAttribute("data-status")] || 0) : 0;
    }
    return order[x.status] || 0;
  }

  // reloading holds, for each reload on its way (the thread's, or a
  // number's list), the messages drawn since it was asked for, by id, and
  // the devices' links heard of since, by fingerprint: its answer may have
  // been read before them, and they are drawn again over it (a message
  // sent while the live view came back was drawn, then wiped by the reload
  // the stream's return asked for; a phone that linked while the reload
  // was on its way showed online, then offline as the answer read it).
  var reloading = [];
  function drawn(m) { reloading.forEach(function (since) { since.msgs[m.id] = m; }); }
  function heard(d) { presence(d); reloading.forEach(function (since) { since.devices[d.device] = d; }); }

  // draw puts a message of the open thread in it, or brings its copy there
  // up to date; false when it was a late copy of an older state.
  function draw(m) {
    var old = thread.querySelector('[data-id="' + m.id + '"]');
    if (old && rank(old) > rank(m)) { return false; } // a late copy of an older state
    var el = msgEl(m);
    if (old) {
      // Focus inside the message (its Cancel) stays with it, drawn anew.
      var had = old.contains(document.activeElement);
      thread.replaceChild(el, old);
      if (had) { el.tabIndex = -1; el.focus(); }
    } else { thread.appendChild(el); el.scrollIntoView({block: "end"}); }
    return true;
  }

  function upsert(m) {
    if (m.channel && m.channel !== "sms") { agentUpsert(m); return; }
    if (!chat || m.device !== chat.getAttribute("data-device")) { return; }
    if (smsDraw(m)) { drawn(m); }
  }

  // smsDraw puts an SMS of the page's device in the open thread (when it is
  // that thread's) and at the top of the conversation list; false when it
  // was a late copy of an older state of a message of the thread.
  function smsDraw(m) {
    if (m.phone === chat.getAttribute("data-phone") && thread && !draw(m)) { return false; }
    convTop({phone: m.phone, phone_display: m.phone_display, last: m.text});
    return true;
  }

  // convItem is a conversation of the list, as the page draws it.
  function convItem(c) {
    var item = document.createElement("li");
    item.setAttribute("data-phone", c.phone);
    var a = document.createElement("a");
    a.href = "/console/messages?device=" + encodeURIComponent(chat.getAttribute("data-device")) + "&phone=" + encodeURIComponent(c.phone);
    if (c.phone === chat.getAttribute("data-phone")) { a.setAttribute("aria-current", "true"); }
    var strong = document.createElement("strong"); strong.appendChild(isolated(c.phone_display || c.phone));
    var last = document.createElement("span"); last.className = "last"; last.dir = "auto"; last.textContent = c.last;
    a.appendChild(strong); a.appendChild(last); item.appendChild(a);
    return item;
  }

  // convTop brings a conversation to the top of the list with its last
  // message, adding it when it is not listed.
  function convTop(c) {
    var convs = document.getElementById("convs");
    if (!convs) { return; }
    var item = convs.querySelector('li[data-phone="' + CSS.escape(c.phone) + '"]');
    if (item) { item.querySelector(".last").textContent = c.last; } else { item = convItem(c); }
    var none = document.getElementById("no-convs");
    if (none) { none.remove(); }
    convs.insertBefore(item, convs.firstChild);
    if (document.getElementById("more-convs")) { moreConvs(true); } // one more listed
  }

  // moreConvs says under the list, as the page draws it, that older
  // conversations are not listed (more), with how many are; or nothing.
  function moreConvs(more) {
    var convs = document.getElementById("convs");
    var line = document.getElementById("more-convs");
    if (!more) { if (line) { line.remove(); } return; }
    if (!line) {
      line = document.createElement("p");
      line.className = "muted"; line.id = "more-convs";
      convs.parentNode.appendChild(line);
    }
    line.textContent = "The " + convs.children.length + " latest are listed; an older conversation comes back to the top with its next message.";
  }

  // presence draws a device's badge online or offline: the messages page's
  // device list ("(online)" after its name), the devices page's cards, the
  // numbers list's agents and a number's agent.
  function presence(d) {
    document.querySelectorAll("#device option").forEach(function (o) {
      if (o.value !== d.device) { return; }
      var was = o.getAttribute("data-online") === "true";
      if (was === d.online) { return; }
      var name = was ? o.textContent.slice(0, -" (online)".length) : o.textContent;
      o.textContent = name + (d.online ? " (online)" : "");
      o.setAttribute("data-online", d.online ? "true" : "false");
    });
    document.querySelectorAll("[data-online][data-device]").forEach(function (b) {
      if (b.getAttribute("data-device") !== d.device) { return; }
      b.className = "badge " + (d.online ? "online" : "offline");
      b.textContent = d.online ? "online" : "offline";
    });
  }

  // WhatsApp and iMessage: a number's page lists its messages, newest first.
  var agentMsgs = document.getElementById("agent-msgs");

  // mediaEl is a received file: an image shown inline, anything else a
  // download link (the server decides which, from the sniffed type).
  function mediaEl(f) {
    var span = document.createElement("span");
    span.className = "media";
    var a = document.createElement("a");
    a.href = f.url;
    if (f.inline) {
      var img = document.createElement("img");
      img.src = f.url; img.alt = "Image received: " + f.label; img.loading = "lazy";
      a.appendChild(img);
    } else {
      a.setAttribute("download", "");
      a.appendChild(isolated(f.label));
    }
    span.appendChild(a);
    return span;
  }

  function agentRow(m) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-id", m.id);
    [timeEl(m.created_at), m.direction, isolated(m.phone)].forEach(function (v) { tr.appendChild(put(document.createElement("td"), [v])); });
    var text = document.createElement("td");
    text.className = "text"; text.dir = "auto";
    if (m.content_type && m.content_type !== "text") { put(text, ["[" + m.content_type + "] ", isolated(m.media_url || ""), " "]); }
    tr.appendChild(put(text, [m.text || ""].concat((m.media || []).map(function (f) { return mediaEl(f); }))));
    var td = document.createElement("td");
    if (m.direction === "outbound") {
      var st = span("status");
      st.setAttribute("data-status", m.status); st.textContent = m.status;
      td.appendChild(st);
      if (m.detail) { td.appendChild(put(span("detail"), [" (", isolated(m.detail), ")"])); }
      if (m.error) { td.appendChild(put(span("error"), [" ", isolated(m.error)])); }
    }
    tr.appendChild(td);
    return tr;
  }

  // agentDraw puts a message of the number in its list, or brings its
  // copy there up to date; false when it was a late copy of an older state.
  function agentDraw(m) {
    var old = agentMsgs.querySelector('tr[data-id="' + m.id + '"]');
    if (old && rank(old) > rank(m)) { return false; }
    var row = agentRow(m);
    if (old) { agentMsgs.replaceChild(row, old); } else { agentMsgs.insertBefore(row, agentMsgs.firstChild); }
    var none = document.getElementById("no-msgs");
    if (none) { none.remove(); }
    return true;
  }

  function agentUpsert(m) {
    if (!agentMsgs || m.number_id !== agentMsgs.getAttribute("data-number")) { return; }
    if (agentDraw(m)) { drawn(m); }
  }

  // refused says a refusal the script got asking for JSON: the server's
  // message from the contract's error body, after what was being done.
  function refused(r, doing) {
    return r.json().catch(function () { return {}; }).then(function (p) {
      say("err", doing + ": " + (p.message || "the server answered " + r.status + "."));
      return null;
    });
  }

  // A reload's answer: its JSON, or null. A session that ended is a 401
  // (the server answers the script so, not with the sign-in page), which
  // the page says as a form's refusal does, keeping what was typed; any
  // other refusal (the device deleted, the store out of reach) is said
  // with the server's message, the page left as it was.
  // what names what was being reloaded, for the banner: "messages", or
  // "devices" on a page that shows badges alone.
  function reloaded(r, what) {
    if (r.status === 401) { sessionExpired(reloadLive); return null; }
    return r.ok ? r.json() : refused(r, "The " + what + " could not be reloaded");
  }

  // unreached says a reload that got no answer at all (the connection
  // dropped): the page shows what it had, which may miss what changed.
  function unreached(what) {
    say("err", "The " + what + " could not be reloaded: the server could not be reached. Reload the page in a moment.");
  }

  // reload asks for what a page lists (u: a thread's or a number's
  // messages, or the devices' state for their badges), draws it anew from
  // the answer (redraw), then draws again over it (drawAgain) what the
  // stream brought while it was on its way, which the answer, read before
  // it, lacks: messages, and the badges of the links heard of meanwhile.
  function reload(u, redraw, drawAgain, what) {
    what = what || "messages";
    var since = {msgs: {}, devices: {}};
    reloading.push(since);
    var done = function () { reloading.splice(reloading.indexOf(since), 1); };
    fetch(u, {credentials: "same-origin", headers: {"Accept": "application/json"}}).then(function (r) { return reloaded(r, what); })
      .then(function (b) {
        done();
        if (!b) { return; }
        redraw(b);
        Object.keys(since.msgs).forEach(function (id) { drawAgain(since.msgs[id]); });
        Object.keys(since.devices).forEach(function (fp) { presence(since.devices[fp]); });
      }, function (err) { done(); throw err; }).catch(function () { unreached(what); });
  }

  // reloadBadges reloads the badges of a page that shows nothing else live
  // (the devices page, the numbers list): each of the company's devices,
  // online or not, from the list the pairing panel asks for too.
  function reloadBadges() {
    reload("/console/devices/state", function (b) {
      b.devices.forEach(function (d) { presence({device: d.fingerprint, online: d.online}); });
    }, function () {}, "devices");
  }

  // reloadLive reloads what the page shows live, after its stream
  // reconnected or opened after a change it never carried.
  function reloadLive() {
    if (agentMsgs) { reloadAgent(); return; }
    if (chat) { reloadThread(); return; }
    reloadBadges();
  }

  function reloadAgent() {
    reload(location.pathname.replace(/\/$/, "") + "/messages", function (b) {
      agentMsgs.textContent = "";
      b.messages.forEach(function (m) { agentMsgs.appendChild(agentRow(m)); });
      var badge = document.querySelector("#number-state [data-online][data-device]");
      if (badge) { presence({device: badge.getAttribute("data-device"), online: !!b.online}); }
    }, agentDraw);
  }

  // reloadThread reloads what the messages page shows of its device: the
  // open thread (if one is open), the conversation list and the devices'
  // badges, in one request.
  function reloadThread() {
    var phone = chat.getAttribute("data-phone") || "";
    reload("/console/messages/thread?device=" + encodeURIComponent(chat.getAttribute("data-device")) + "&phone=" + encodeURIComponent(phone), function (b) {
      if (phone && thread) {
        thread.textContent = "";
        b.messages.forEach(function (m) { thread.appendChild(msgEl(m)); });
      }
      var convs = document.getElementById("convs");
      if (convs && b.convs) {
        convs.textContent = "";
        b.convs.forEach(function (c) { convs.appendChild(convItem(c)); });
        var none = document.getElementById("no-convs");
        if (none && b.convs.length) { none.remove(); }
        moreConvs(b.more);
      }
      Object.keys(b.online || {}).forEach(function (fp) { presence({device: fp, online: b.online[fp]}); });
    }, smsDraw);
  }

  function sent(form, out) {
    var text = form.querySelector("textarea");
    if (text) { text.value = ""; text.focus(); }
    var m = out.data;
    if (!m) { return; }
    if (m.channel && m.channel !== "sms") { agentUpsert(m); return; }
    if (chat && m.phone !== chat.getAttribute("data-phone")) {
      // A new conversation: open it (the stream keeps it live from there).
      location.assign(out.redirect);
      return;
    }
    upsert(m);
    // A form of the message itself (Cancel) went with the message drawn
    // anew: focus goes to the message, not to the top of the page.
    var el = !text && thread && thread.querySelector('[data-id="' + m.id + '"]');
    if (el) { el.tabIndex = -1; el.focus(); }
  }

  // live is the element whose data-live tells (and tests see) whether the
  // stream is open, the one that carries the page's mark
  // (data-live-since): the chat, a number's message list, the devices
  // page's list or the numbers list.
  var live = document.querySelector("[data-live-since]");
  if (live && window.EventSource) {
    var opened = false;
    // wait is the delay before the next try while the server refuses the
    // stream: from 1 s, doubled each time, never over 30 s, back to 1 s once
    // a stream opens; so a long outage costs one request per half minute.
    var wait = 1000;
    var again = function () { setTimeout(connect, wait); wait = Math.min(wait * 2, 30000); };
    // why asks the stream's own URL why it was refused: an EventSource reads
    // no status, fetch does, and the stream's own answer cannot disagree
    // with the stream (401 for a session that ended, 503 for a store the
    // server cannot reach, 429 for too many tabs) as another page's could.
    // An answer of 200 is a stream: it is dropped at once and the next try
    // opens one as usual.
    var why = function () {
      var ctl = new AbortController();
      fetch("/console/events", {credentials: "same-origin", headers: {"Accept": "application/json"}, signal: ctl.signal})
        .then(function (r) {
          if (r.status === 401) { ctl.abort(); sessionExpired(connect); return null; } // no retry: sign-in first
          if (r.status === 503) { say("err live", "The server cannot reach its store; live updates resume when it is back."); }
          if (r.ok || r.status === 503) { ctl.abort(); again(); return null; }
          return r.json().catch(function () { return {}; }).then(function (p) {
            say("err live", p.message || "The live view was refused; it tries again shortly.");
            again();
          });
        })
        .catch(function () {
          say("err live", "The server could not be reached; live updates resume when it is back.");
          again();
        });
    };
    // lost is the timer of a stream that broke and has not opened again
    // (the network down, the server stopped): the EventSource retries by
    // itself every 3 s (the stream's retry), and a stream the server ended
    // (fallen behind, a cluster's resync) is open again within that, so a
    // stream still closed after twice as long says so.
    var lost = null;
    // The stream starts after the page was drawn: since is the server's
    // mark of that moment (data-live-since), and a stream that opens after
    // a change it never carried says catchup first, once, the page then
    // reloading what it shows as after a reconnection. An EventSource
    // opens again with the same address, so a reopened stream may say it
    // too: caught is true once this opening has reloaded. The page names
    // what it shows (data-live-of: the devices' links, a device's SMS, a
    // number's messages), and only a change of that is caught up: the
    // devices page reloaded its badges after any message of the company.
    var since = live.getAttribute("data-live-since");
    var of = live.getAttribute("data-live-of");
    var caught = false;
    var connect = function () {
      var es = new EventSource("/console/events" + (since ? "?since=" + encodeURIComponent(since) + (of ? "&of=" + encodeURIComponent(of) : "") : ""));
      es.addEventListener("open", function () {
        if (lost) { clearTimeout(lost); lost = null; }
        caught = opened;
        if (opened) { reloadLive(); } // events may have been missed while away
        opened = true;
        wait = 1000;
        live.setAttribute("data-live", "true");
        if (banner && banner.classList.contains("live")) { banner.hidden = true; }
      });
      es.addEventListener("catchup", function () { if (!caught) { caught = true; reloadLive(); } });
      es.addEventListener("message", function (ev) { upsert(JSON.parse(ev.data)); });
      es.addEventListener("device", function (ev) { heard(JSON.parse(ev.data)); });
      es.addEventListener("signedout", function () { es.close(); live.setAttribute("data-live", "false"); sessionExpired(connect); });
      // The server could not check the session (its store is out of
      // reach): nothing says it ended, so ask why and come back.
      es.addEventListener("unavailable", function () { es.close(); live.setAttribute("data-live", "false"); why(); });
      es.addEventListener("error", function () {
        live.setAttribute("data-live", "false");
        // Refused (CLOSED): ask why, then try again. A server that is down
        // leaves it CONNECTING, and it retries by itself: said if it is
        // still away after two of its tries. A page left for another ends
        // its stream so too, just before it is unloaded: asked in a task
        // of its own, why never runs then. It ran, a request (a stream the
        // server opened, on a cluster with its lease) for a page no one
        // would read.
        if (es.readyState === EventSource.CLOSED) { setTimeout(why, 0); return; }
        if (!lost) {
          lost = setTimeout(function () {
            lost = null;
            if (es.readyState === EventSource.CONNECTING) {
              say("err live", "The server could not be reached; live updates resume when it is back.");
            }
          }, liveLost);
        }
      });
    };
    connect();
  }
})();
