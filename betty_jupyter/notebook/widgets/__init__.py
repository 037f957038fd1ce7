"""The ipywidgets of Betty's notebook face: approval cards, job tables, live jobs, the GPU calculator, chat."""
