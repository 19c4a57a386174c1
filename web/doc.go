// Package web is simrelay's web console: server-rendered pages
// (html/template), one stylesheet and a little plain JavaScript, all
// embedded, served by the same binary beside the JSON API. It calls the same
// domain services as the API and enforces the same role and tenant rules;
// docs/console.md describes its routes, sessions and live updates.
package web
