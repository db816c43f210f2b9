"""Corpus readers: each yields `openafm.data.document.Document`s from one installed source."""
