"""The signed-in person: the throttled sign-in form, single sign-on, the account page."""
