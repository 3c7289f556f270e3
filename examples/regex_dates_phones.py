"""Regex constraints: an ISO date and a phone number, each guaranteed to match its pattern.

    python examples/regex_dates_phones.py
"""

import re

from constrained_spec import Generator

DATE = r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
PHONE = r"\+1 [0-9]{3}-[0-9]{3}-[0-9]{4}"


def main(generator: Generator | None = None) -> dict[str, str]:
    generator = generator or Generator()
    date = generator.generate("On what date did Apollo 11 land on the Moon? Answer as YYYY-MM-DD.", regex=DATE, temperature=0)
    phone = generator.generate("Write a US phone number for a pizza shop.", regex=PHONE, temperature=0.7, seed=1)
    assert re.fullmatch(DATE, date.text) and re.fullmatch(PHONE, phone.text)
    print("date: ", date.text)
    print("phone:", phone.text)
    return {"date": date.text, "phone": phone.text}


if __name__ == "__main__":
    main()
