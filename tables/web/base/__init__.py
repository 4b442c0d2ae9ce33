"""What every page is made of: the views' shared parts (sign-in, errors, parameters, the site
context), forms, presentation helpers, plotly figures, the static files."""
