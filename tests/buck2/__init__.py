"""The Buck2 rules' tests' helpers: the recorder of the actions they register."""
