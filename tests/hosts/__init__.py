"""The hosts tests run on: the one every unit test sees (`unit`), whatever machine it is."""
