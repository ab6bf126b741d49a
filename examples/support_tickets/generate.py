"""Seeded generator of a support-ticket log: a long-context aggregation example.

Each line is ``YYYY-MM-DD | user_id | free text``. About 100 of the 5,000 tickets come
from the target users 12345, 67890 and 11111; the question asks how many of those are
about billing. Billing tickets are written in varied words (many never say "billing"),
and distractors punish shortcuts: six-digit user ids that contain the target ids, target
ids used as invoice numbers in other users' tickets, and non-billing tickets that use
money-adjacent words (battery charge, project plan, ...) in a clearly non-billing sense.

Run as a script (``python examples/support_tickets/generate.py --out tickets.txt``) or
import as ``examples.support_tickets.generate``. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

QUESTION = "Among users 12345, 67890 and 11111, how many issues are about billing?"
TARGET_USERS = ("12345", "67890", "11111")
# Six-digit ids containing a target id, and five-digit look-alikes: not target users.
NEAR_MISS_USERS = ("123456", "612345", "678901", "967890", "111110", "111112", "211111", "12354", "67809")
FIRST_DAY, LAST_DAY = date(2023, 1, 1), date(2025, 12, 31)


@dataclass(frozen=True)
class Ticket:
    date: str
    user_id: str
    text: str
    billing: bool

    def line(self) -> str:
        return f"{self.date} | {self.user_id} | {self.text}"


_SLOTS: dict[str, Callable[[random.Random], str]] = {
    "plan": lambda r: r.choice(["Pro", "Team", "Business", "Starter", "Premium", "Plus"]),
    "plan2": lambda r: r.choice(["Enterprise", "Business", "Team annual", "Pro annual"]),
    "brand": lambda r: r.choice(["Visa", "Mastercard", "Amex", "Discover"]),
    "last4": lambda r: f"{r.randint(0, 9999):04d}",
    "inv": lambda r: f"INV-{r.randint(10000, 99999)}",
    "month": lambda r: r.choice(["January", "March", "April", "June", "August", "October", "December"]),
    "days": lambda r: str(r.randint(8, 40)),
    "seats": lambda r: str(r.randint(8, 40)),
    "seats2": lambda r: str(r.randint(2, 7)),
    "year": lambda r: str(r.randint(2022, 2024)),
    "code": lambda r: r.choice(["SPRING20", "WELCOME10", "LAUNCH50", "EDU15"]),
    "feature": lambda r: r.choice(["Reports", "Calendar", "Kanban", "Inbox", "Files", "Timeline"]),
    "device": lambda r: r.choice(["Android", "my iPhone", "an iPad", "Windows 11", "macOS", "Chromebook"]),
    "secs": lambda r: str(r.randint(12, 90)),
    "n": lambda r: str(r.choice([500, 1000, 5000, 10000])),
    "mb": lambda r: str(r.choice([5, 10, 20, 25])),
}

BILLING = (
    "I was charged twice for my {plan} subscription this month.",
    "My card ending in {last4} was billed {amount} even though I downgraded to the free tier last week.",
    "Could you send me a copy of invoice {inv}? I can't find it in my inbox.",
    "I'd like a refund for the {amount} charge from {month}; I cancelled before the renewal date.",
    "The receipt for my last payment shows the wrong company name and VAT number.",
    "How do I update the credit card on file? My old {brand} card expired.",
    "Why did my monthly fee go up from {amount} to {amount2} without any notice?",
    "There is a charge of {amount} on my bank statement from you that I don't recognise.",
    "Please cancel my subscription and make sure no further payments are taken.",
    "My payment keeps getting declined although the same {brand} card works everywhere else.",
    "I was double charged when I upgraded from {plan} to {plan2}.",
    "Can I switch from monthly to yearly billing and get the annual discount?",
    "Your pricing page lists {amount} per seat but I was invoiced {amount2} per seat.",
    "Please address future invoices to our finance department instead of to me personally.",
    "The refund you confirmed still hasn't reached my account after {days} days.",
    "Is it possible to pay by bank transfer instead of by credit card?",
    "I was charged {amount} the day my trial ended even though I had cancelled it.",
    "We are tax exempt, please remove the sales tax from invoice {inv}.",
    "My PayPal payment went through but the {plan} plan still shows as unpaid.",
    "I got an email saying my payment failed, yet my bank shows the money was taken.",
    "We were billed for {seats} seats but only have {seats2} active users.",
    "Do you offer a nonprofit or student discount on the {plan} plan price?",
    "Please issue a credit note for invoice {inv}; the total on it is wrong.",
    "The renewal notice says {amount2} but last year I paid {amount}. What changed?",
    "Where can I download all my receipts from {year} for my accountant?",
    "The coupon code {code} was not applied at checkout and I paid the full price.",
    "I'd like my money back for the unused months of my annual plan.",
    "My company card was charged in dollars but we agreed to be invoiced in euros.",
    "You took {amount} from my account twice on the same day, please reverse one of them.",
    "How much would it cost to add {seats2} more users to our {plan} subscription?",
    "The amount on invoice {inv} doesn't match what the checkout page quoted me.",
    "Please stop the automatic renewal of my subscription, I don't want to be charged again.",
)

OTHER = (
    "I can't log in; the page just reloads after I enter my password.",
    "The app crashes every time I open the {feature} tab on {device}.",
    "Password reset emails never arrive, and I already checked the spam folder.",
    "The dashboard takes more than {secs} seconds to load since yesterday.",
    "Feature request: please add a dark mode to the {feature} view.",
    "Export to CSV produces an empty file for reports with more than {n} rows.",
    "I no longer get push notifications on {device}.",
    "The Slack integration stopped posting updates to our channel.",
    "Two-factor codes are rejected even though the clock on my phone is correct.",
    "Search doesn't find documents I know exist when I put the query in quotes.",
    "Could you add keyboard shortcuts for moving tasks between columns?",
    "The Google Calendar sync duplicates every event I create.",
    "Since the latest update the sidebar overlaps the editor on small screens.",
    "I tried to invite a teammate but the invite link says it has expired.",
    "Uploading images larger than {mb} MB fails with a generic error.",
    "The mobile app logs me out every few minutes on {device}.",
    "Please add an option to export the whole workspace as JSON.",
    "The timezone in my profile keeps resetting to UTC.",
    "Email notifications arrive several hours late.",
    "Our Okta single sign-on fails with an 'invalid audience' message.",
    "The API returns a 500 error when I create more than {n} items at once.",
    "Comments I write on mobile don't show up on desktop.",
    "The PDF export cuts off the right margin of wide tables.",
    "I can't change my display name because the Save button is greyed out.",
    "The Zapier integration doesn't trigger on new records.",
    "Scrolling is very slow in Firefox when a board has many cards.",
    "Could you make the font size in the editor adjustable?",
    "I accidentally deleted a project. Is there any way to restore it?",
    "The account settings page goes blank after I click on Security.",
    "My phone's battery charge drops quickly whenever the app syncs in the background.",
    "The free-text notes field cuts off anything longer than 255 characters.",
    "I can't rename a project plan in the roadmap view.",
    "The credits screen in the About dialog shows the wrong version number.",
    "Where can I change the language of the interface?",
    "Our webhook receives every update twice.",
    "The {feature} page shows a spinner forever on {device}.",
    "Drag and drop of files into the {feature} tab doesn't work in Safari.",
    "The weekly summary email is sent to people who unsubscribed.",
)

OPENERS = ("", "", "", "Hi, ", "Hello team, ", "Hey, ", "Good morning. ", "Quick question: ", "Urgent: ")
CLOSERS = (
    "", "", "", " Thanks.", " Please help.", " Thanks in advance!", " Let me know.",
    " This is the second time I'm writing about this.", " Any update would be appreciated.",
)  # fmt: skip


def _fill(template: str, rng: random.Random, **fixed: str) -> str:
    values = {
        name: fixed.get(name) or make(rng) for name, make in _SLOTS.items() if f"{{{name}}}" in template
    }
    # Both amounts of a ticket share a currency, and amount2 is the larger one.
    currency, cents = rng.choice(["$", "$", "€", "£"]), rng.choice(["", ".00", ".99", ".50"])
    low = rng.randint(5, 300)
    values["amount"] = f"{currency}{low}{cents}"
    values["amount2"] = f"{currency}{low + rng.randint(5, 120)}{cents}"
    return template.format(**values)


def ticket_text(rng: random.Random, billing: bool, invoice: str | None = None) -> str:
    """A free-text ticket body; ``invoice`` forces an invoice-number template."""
    if invoice:
        template = rng.choice([t for t in BILLING if "{inv}" in t])
    else:
        template = rng.choice(BILLING if billing else OTHER)
    body = _fill(template, rng, inv=invoice or "")
    opener = rng.choice(OPENERS)
    if opener.endswith(", ") and not body.startswith(("I ", "I'")):
        body = body[0].lower() + body[1:]
    text = f"{opener}{body}{rng.choice(CLOSERS)}"
    return text.replace("|", "/").replace("\n", " ")


def _random_date(rng: random.Random) -> str:
    return (FIRST_DAY + timedelta(days=rng.randint(0, (LAST_DAY - FIRST_DAY).days))).isoformat()


def generate(seed: int = 0, n: int = 5000) -> tuple[str, int, list[Ticket]]:
    """Return (context text, gold answer, tickets) for ``n`` tickets, deterministic per seed."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    per_user = max(1, round(n / 150))  # about 33 each for 5,000 tickets
    specs: list[tuple[str, float]] = []  # (user id, probability of billing)
    for user in TARGET_USERS:
        specs += [(user, 0.45)] * max(1, per_user + rng.randint(-3, 3))
    near = max(len(NEAR_MISS_USERS), round(n / 120))
    specs += [(NEAR_MISS_USERS[i % len(NEAR_MISS_USERS)], 0.6) for i in range(near)]
    specs = specs[:n]
    excluded = set(TARGET_USERS) | set(NEAR_MISS_USERS)
    pool = sorted({str(rng.randint(10000, 99999)) for _ in range(max(50, n // 4))} - excluded)
    specs += [(rng.choice(pool), 0.3) for _ in range(n - len(specs))]
    rng.shuffle(specs)

    tickets: list[Ticket] = []
    decoy_invoices = list(TARGET_USERS) * 4  # target ids reused as invoice numbers elsewhere
    for user, p_billing in specs:
        billing = rng.random() < p_billing
        invoice = None
        if billing and user not in TARGET_USERS and decoy_invoices and rng.random() < 0.05:
            invoice = decoy_invoices.pop()
        tickets.append(Ticket(_random_date(rng), user, ticket_text(rng, billing, invoice), billing))
    tickets.sort(key=lambda t: t.date)
    gold = sum(1 for t in tickets if t.user_id in TARGET_USERS and t.billing)
    return "\n".join(t.line() for t in tickets) + "\n", gold, tickets


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the support-tickets long-context example.")
    parser.add_argument("--out", required=True, type=Path, help="where to write the tickets text")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--n", type=int, default=5000, help="number of tickets (default 5000)")
    parser.add_argument("--gold-out", type=Path, help='also write {"question", "answer"} JSON here')
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    text, gold, tickets = generate(seed=args.seed, n=args.n)
    args.out.write_text(text, encoding="utf-8")
    if args.gold_out is not None:
        payload = {"question": QUESTION, "answer": gold}
        args.gold_out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(tickets)} tickets to {args.out}", file=sys.stderr)
    print(gold)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
