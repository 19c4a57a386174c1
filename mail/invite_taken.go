package mail

import "fmt"

// InviteAddressTaken is the invitation mail for an address that already has
// an account: an address signs in to one company only, so the invitation
// cannot be accepted with it. It goes to the address's owner alone; the
// inviting company is told nothing, and the mail says so.
func InviteAddressTaken(firstName, companyName, inviterName string) Message {
	company, inviter := cleanName(companyName), cleanName(inviterName)
	if company == "" {
		company = "a company"
	}
	intro := fmt.Sprintf("You have been invited to join %s on simrelay.", company)
	if inviter != "" {
		intro = fmt.Sprintf("%s invited you to join %s on simrelay.", inviter, company)
	}
	return render(content{
		Subject:  fmt.Sprintf("Your invitation to %s on simrelay", company),
		Greeting: greeting(firstName),
		Lines: []string{intro,
			"This e-mail address already has a simrelay account, and an address can belong to one company only, so the invitation cannot be accepted with it.",
			fmt.Sprintf("To join %s, ask them to invite another of your addresses. They have not been told that this address has an account.", company)},
		Notes: []string{"If you did not expect this invitation, you can ignore this e-mail."},
	})
}
