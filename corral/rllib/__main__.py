"""``python -m corral.rllib``: print the migration table (RLlib's names and what each is in corral)."""

from corral.rllib import table_docs

if __name__ == "__main__":
    print(table_docs.render(), end="")
