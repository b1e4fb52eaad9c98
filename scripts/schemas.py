"""Write the JSON Schema of each command's JSON answer (accelbench.report.answers) to
docs/schemas/FORMAT.json; the suite checks that the files are current.

    python scripts/schemas.py
"""

from __future__ import annotations

import json
from pathlib import Path

from accelbench.report import answers

FOLDER = Path(__file__).parents[1] / "docs" / "schemas"


def schemas() -> dict[str, str]:
    """Each schema file's name and text."""
    found = {}
    for name, model in answers.every().items():
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
        schema |= model.model_json_schema(mode="serialization")
        found[f"{name}.json"] = json.dumps(schema, indent=1) + "\n"
    return found


def main() -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for name, text in schemas().items():
        (FOLDER / name).write_text(text)
        print(f"wrote {FOLDER / name}")


if __name__ == "__main__":
    main()
