package boltstore

// pageOffset is how many items come before page (counted from 1) of pages
// of limit items, when that page holds any of total items. It never
// multiplies first: page comes straight from a query string, and
// (page-1)*limit overflows for a page near the largest int, wrapping round
// to an early page.
func pageOffset(page, limit, total int) (skip int, ok bool) {
	if page < 1 || limit < 1 || total <= 0 {
		return 0, false
	}
	pages := (total-1)/limit + 1
	if page > pages {
		return 0, false
	}
	return (page - 1) * limit, true // at most total - 1
}
