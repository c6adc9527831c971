"""Tests of the model-family configs."""
