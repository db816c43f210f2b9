"""SFT data made with verifiers (report §5: "verified synthetic data").

    rejection.py  rejection sampling: k samples per prompt, kept when a verifier accepts them or by majority vote
    tool_data.py  tool-use SFT data: BFCL's train split as chat examples (tools prompt, question, ground-truth calls
                  as the constrained grammar writes them), each verified by the grammar and the eval's AST match
"""
