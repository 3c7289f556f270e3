"""A Lark grammar: the bundled `arithmetic` grammar, and an inline SQL-like one.

    python examples/lark_arithmetic.py
"""


from constrained_spec import Generator

# A grammar of your own is plain Lark text.
TINY_SELECT = r"""
start: "SELECT " column (", " column)* " FROM " table ";"
column: /[a-z_]+/
table: "users" | "orders"
"""


def main(generator: Generator | None = None) -> dict[str, str]:
    generator = generator or Generator()
    expr = generator.generate("Write an arithmetic expression whose value is 12.", grammar="arithmetic", temperature=0, max_tokens=30)
    sql = generator.generate("Select the names and emails of all users.", grammar=TINY_SELECT, temperature=0, max_tokens=30)
    print("expression:", expr.text, "(incomplete)" if expr.incomplete else "")
    print("sql:       ", sql.text, "(incomplete)" if sql.incomplete else "")
    return {"expression": expr.text, "sql": sql.text}


if __name__ == "__main__":
    main()
