"""tools/saved_diff.py records what autograd saves, by storage, with the module that saved it."""
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import saved_diff  # noqa: E402


class Block(torch.nn.Module):
    """Linear -> GELU -> Linear: fc1 saves its input, gelu saves fc1's output, fc2 saves gelu's."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 64)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))).sum()


def make():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(8, 16, requires_grad=True)
    return model, (x,)


class SavedDiffTest(unittest.TestCase):
    def test_records_each_saved_storage_once_with_its_module(self):
        model, inputs = make()
        rec = saved_diff.SavedRecorder(model)
        loss = rec.run(lambda: model(*inputs))
        loss.backward()
        rows = list(rec.rows.values())
        # Parameters are not activations: never recorded.
        by_module = {}
        for r in rows:
            by_module.setdefault(r["module"], 0)
            by_module[r["module"]] += r["bytes"]
        self.assertEqual(by_module.get("fc1"), 8 * 16 * 4)   # fc1 saves x
        self.assertEqual(by_module.get("act"), 8 * 64 * 4)   # gelu saves fc1's output
        self.assertEqual(by_module.get("fc2"), 8 * 64 * 4)   # fc2 saves gelu's output
        self.assertEqual(sum(r["bytes"] for r in rows), 8 * 16 * 4 + 2 * 8 * 64 * 4)

    def test_command_line_with_a_factory(self):
        from io import StringIO
        from contextlib import redirect_stdout

        out = StringIO()
        with redirect_stdout(out):
            code = saved_diff.main(["--factory", "test_saved_diff:make", "--memplan", ""])
        self.assertEqual(code, 0)
        self.assertIn("total", out.getvalue())
        self.assertIn(f"{8 * 16 * 4 + 2 * 8 * 64 * 4:,}", out.getvalue())

    def test_layer_index_of_hf_module_paths(self):
        self.assertEqual(saved_diff.layer_of("model.layers.3.mlp.down_proj", "layers"), 3)
        self.assertIsNone(saved_diff.layer_of("model.norm", "layers"))


if __name__ == "__main__":
    unittest.main()
