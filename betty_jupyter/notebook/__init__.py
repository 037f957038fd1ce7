"""Betty's notebook face: the ``%betty`` magics and the widgets they render."""
