/*
 * authreply.c: the table of authentication replies; see authreply.h.
 * Each row names the provider's document its reply text and its fix
 * come from (title, and the date of the version read); the wording of
 * the advice is weir's.  A row matches the provider's own text, not only
 * its codes (535 5.7.8 is every server's "invalid credentials", RFC 4954
 * 6); more specific rows come first: the first that matches wins.
 * Gmail has sent each of its texts under more than one code (534 5.7.9
 * and 534 5.7.14 for the browser check, 535 5.7.1 in older replies), so
 * its rows take any 5.7.x and key on the text.
 *
 * Trusts: nothing.  Config keys: none.
 */
#include <fnmatch.h>
#include <stddef.h>

#include "mail/authreply.h"

/*
 * The sources, as checked on 2026-11-29 against the stored copies of the
 * pages (the live pages were not reachable): a date is the one the page
 * carries, "undated" where it carries none.  Several reply texts are in
 * no provider document: those rows rest on real servers' replies quoted
 * in public bug reports, named in oauthparse_test.c beside each example.
 */
#define MS_SMTPAUTH "Microsoft Learn, \"Enable or disable SMTP AUTH in Exchange Online\" " \
	"(authenticated-client-smtp-submission, where the replies' aka.ms/smtp_auth_disabled " \
	"leads; its date not checked)"
#define MS_OAUTH "Microsoft Learn, \"Authenticate an IMAP, POP or SMTP connection using " \
	"OAuth\" (ms.date 2021-09-21, edited 2025-09)"
#define MS_BASIC "Microsoft Exchange Team Blog, \"Exchange Online to retire Basic auth for " \
	"Client Submission (SMTP AUTH)\" (2024-04-15, updated 2025-06-11; the timeline " \
	"revised 2026-01-27)"
#define G_SMTP "Google Workspace Admin Help, \"Gmail SMTP errors and codes\" (answer " \
	"3726730, undated)"
#define G_DWD "the reply as Gmail sends it; the fix: Google Workspace Admin Help, \"Control " \
	"API access with domain-wide delegation\" (answer 162106, undated)"

const struct authreply authreply_table[] = {
	{ "535 5.7.139 *disabled for the Tenant*", "Exchange Online",
	    "SMTP AUTH is turned off for the whole organisation (tenant)",
	    "turn it on for this mailbox: in the Microsoft 365 admin center, Users, Active "
	    "users, the mailbox, Mail, Manage email apps, tick Authenticated SMTP (or "
	    "Set-CASMailbox -Identity MAILBOX -SmtpClientAuthenticationDisabled $false), then "
	    "weir resume; no new login or secret fixes it", MS_SMTPAUTH },
	{ "535 5.7.139 *disabled for the Mailbox*", "Exchange Online",
	    "SMTP AUTH is turned off for this mailbox",
	    "turn it on: in the Microsoft 365 admin center, the mailbox, Mail, Manage email "
	    "apps, tick Authenticated SMTP (or Set-CASMailbox -Identity MAILBOX "
	    "-SmtpClientAuthenticationDisabled $false), then weir resume; no new login or "
	    "secret fixes it", MS_SMTPAUTH },
	{ "535 5.7.139 *security defaults*", "Exchange Online",
	    "Entra ID's security defaults block SMTP AUTH for the account",
	    "an administrator of Entra ID turns security defaults off (Entra admin center, "
	    "Identity, Overview, Properties) or lets this account use SMTP AUTH through a "
	    "Conditional Access policy, then weir resume", MS_SMTPAUTH },
	{ "535 5.7.139 *basic authentication is disabled*", "Exchange Online",
	    "Exchange Online takes no password for SMTP AUTH from this organisation (Basic "
	    "authentication is turned off)",
	    "give the upstream an oauth section instead of secret_file (weir.conf(5), OAuth "
	    "section: flow device, or client_credentials for an application); an app "
	    "password does not help", MS_BASIC },
	{ "535 5.7.139 *user credentials were incorrect*", "Exchange Online",
	    "Exchange refused the user name with that password",
	    "username must be the whole mailbox address; put the mailbox's current password "
	    "in secret_file (or, with an oauth section, run weir auth login)", MS_SMTPAUTH },
	{ "535 5.7.139 *", "Exchange Online",
	    "the sign-in did not meet the tenant's conditions (Conditional Access, MFA, or "
	    "SMTP AUTH turned off)",
	    "look up the sign-in in Entra ID's sign-in logs (it names the policy that "
	    "blocked it); make sure Authenticated SMTP is on for the mailbox; then weir "
	    "resume", MS_SMTPAUTH },
	{ "550 5.7.30 *Basic authentication is not supported*", "Exchange Online",
	    "Exchange Online no longer takes a password for SMTP AUTH (Basic authentication "
	    "is turned off)",
	    "give the upstream an oauth section instead of secret_file (weir.conf(5), OAuth "
	    "section: flow device, or client_credentials for an application)", MS_BASIC },
	{ "535 5.7.3 Authentication unsuccessful*", "Exchange Online",
	    "Exchange refused the credentials or the token (wrong password, or a token "
	    "without the right to send as this mailbox)",
	    "with OAuth: username must be the mailbox; a user's token needs the scope "
	    "https://outlook.office.com/SMTP.Send; an application's (client_credentials) "
	    "needs its service principal registered in Exchange (New-ServicePrincipal) and "
	    "given the mailbox (Add-MailboxPermission -AccessRights FullAccess); then weir "
	    "auth login; with a password: fix the secret", MS_OAUTH },
	{ "53[45] 5.7.* *Application-specific password required*", "Gmail",
	    "the account has 2-Step Verification: Gmail wants an app password, not the "
	    "account's password",
	    "make an app password for the account (Google Account, Security, App passwords) "
	    "and put it in secret_file, or use an oauth section (provider google)",
	    G_SMTP },
	{ "53[45] 5.7.* *log in *web browser*", "Gmail",
	    "Google wants the account signed in once in a browser (a security check)",
	    "sign in to the account in a browser and answer Google's check, then weir resume",
	    G_SMTP },
	{ "535 5.7.* *Username and Password not accepted*", "Gmail",
	    "Gmail refused the user name with that password or token",
	    "with OAuth: username must be the account the token is for, the scope "
	    "https://mail.google.com/; a service account needs domain-wide delegation for its "
	    "client ID with that scope in the Admin console (Security, API controls, "
	    "Domain-wide delegation) and sub = the mailbox; then weir auth login; with a "
	    "password: an app password in secret_file", G_DWD },
	{ NULL, NULL, NULL, NULL, NULL },
};

const struct authreply *
authreply_find(const char *reply)
{
	const struct authreply *a;

	if (reply == NULL)
		return NULL;
	for (a = authreply_table; a->pattern; a++)
		if (fnmatch(a->pattern, reply, FNM_CASEFOLD) == 0)
			return a;
	return NULL;
}
