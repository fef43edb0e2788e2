"""Input checks: every check of a value entering the library, one function each."""
