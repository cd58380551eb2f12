"""The real-bug zoo (team issue 44): buggy programs people reported, each with the fix its author
or the accepted answer found. `case.py` says what a case is; the case lists live beside it;
`bench/real_bug_zoo.py` trains, verifies and scores them."""
