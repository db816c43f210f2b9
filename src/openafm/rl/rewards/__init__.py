"""Rewards (report §5): verifiable reward functions by name, each a pure function of a prompt record and a response.

    registry.py  the registry: math answers, instruction checkers, reasoning-gym scorers, chrf, tool calls via a
                 checker; answer extraction and matching
"""
