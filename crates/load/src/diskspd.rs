//! diskspd command-line syntax.
