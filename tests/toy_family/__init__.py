"""A toy paper family, registered only by the test that shows adding a family needs one folder and one line."""
