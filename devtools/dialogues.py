"""Real-looking customer-service dialogues for tests and benchmarks of the response kind.

Planted pairs prove arithmetic; a default is valid only if it holds on text that looks like the
real thing (RESPONSE-SPEC.md; issue 27). No real corpus may be downloaded here, so this module
writes helpdesk dialogues the way STC-3's and DialEval's look: several domains, many intents, each
said in many ways by customers and answered in many ways by agents, with order numbers, products,
cities and dates filled in, greetings, thanks and follow-up turns, replies of very different
lengths, and the same surface words ("order", "account", "please") across intents, so that
retrieval and rating have to tell intents apart rather than match a planted token.

``dialogues(n, seed)`` gives the dialogues; ``pool_pairs`` their (utterance, response) pairs;
``response_items`` held-out items with human-like weighted references (the true reply, another
agent's rewording, a rated-inappropriate reply of another intent).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PRODUCTS = ["router", "washing machine", "laptop", "phone", "coffee maker", "vacuum cleaner", "printer",
            "smart watch", "headphones", "tablet", "microwave", "electric kettle", "camera", "monitor"]
CITIES = ["Leeds", "Osaka", "Lyon", "Denver", "Porto", "Shenzhen", "Glasgow", "Austin", "Turin", "Kyoto"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
PLANS = ["basic", "family", "premium", "student", "business"]
NAMES = ["Anna", "Ben", "Chloe", "David", "Emma", "Hiro", "Li", "Maria", "Omar", "Sofia"]

# intent: (customer openings, agent replies, customer follow-ups, agent answers to the follow-up)
INTENTS: dict[str, tuple[list[str], list[str], list[str], list[str]]] = {
    "late_delivery": (
        ["My order {order} still hasn't arrived and it was due last {day}.",
         "Where is my package? The tracking for {order} hasn't moved in four days.",
         "I ordered a {product} two weeks ago and nothing has come yet.",
         "hi, my delivery is late again, order number {order}",
         "The courier said they'd deliver on {day} but nobody came."],
        ["I'm sorry your parcel is late. I've checked order {order}: it is at our {city} depot and should "
         "reach you within two working days.",
         "Sorry about the delay. The courier has your package and expects to deliver it by {day}.",
         "Apologies for that. I can see the parcel was held at the depot; I've asked for it to go out on the "
         "next van, and you'll get a text with a delivery slot.",
         "I understand how frustrating that is. If it has not arrived by {day}, we will send a replacement "
         "{product} free of charge.",
         "Thanks for your patience. The tracking was not updated but the parcel left {city} this morning."],
        ["Can I pick it up from the depot instead?", "Will I get a refund for the delivery fee?",
         "Can you make sure they ring the bell this time?"],
        ["Yes, you can collect it from the {city} depot any day between 8am and 6pm with your order number.",
         "Yes, I've refunded the delivery charge; it will show on your card in 3 to 5 days.",
         "Of course, I've added a note for the driver to ring and wait at the door."]),
    "refund": (
        ["I returned the {product} last week, when will I get my money back?",
         "I want a refund for order {order}, the item is faulty.",
         "How long do refunds take? I sent the {product} back on {day}.",
         "can i get a refund please, the {product} doesn't work"],
        ["Refunds are issued within five working days of the return reaching our warehouse; yours arrived on "
         "{day}, so the money should be back by the end of next week.",
         "I'm sorry the {product} is faulty. I've started a full refund for order {order}; you'll get an email "
         "confirmation shortly.",
         "I can see the return was received. The refund of the full price has been processed and takes 3 to 5 "
         "days to reach your bank.",
         "Yes, of course. Please send it back with the prepaid label in your account and we will refund you "
         "as soon as it arrives."],
        ["Will the postage be refunded too?", "Can I have store credit instead?",
         "I paid by PayPal, does that change anything?"],
        ["Yes, the return postage is included in the refund.",
         "Yes, store credit is available straight away; I've switched it over for you.",
         "PayPal refunds are usually faster, within 24 hours of processing."]),
    "password_reset": (
        ["I can't log in to my account, it says my password is wrong.",
         "I forgot my password and the reset email never arrives.",
         "How do I change the password on my account?",
         "Locked out of my account after too many attempts, help"],
        ["You can reset it from the sign-in page: click 'Forgot password' and we'll email you a link, which "
         "works for 30 minutes.",
         "I've sent a new reset link to the address on your account; please check your spam folder if you "
         "don't see it in a few minutes.",
         "For security your account is locked for 15 minutes after five failed attempts; after that you can "
         "try again or reset the password.",
         "Go to Settings, then Security, then Change password. You'll need your current password once."],
        ["The link says it has expired.", "I no longer have access to that email address.",
         "Do I need to log in again on my phone?"],
        ["Links expire after 30 minutes; I've sent a fresh one just now.",
         "In that case I can verify you by phone and change the email address on the account.",
         "Yes, changing the password signs you out on every device, so you'll need to log in again."]),
    "billing_error": (
        ["I've been charged twice for my {plan} plan this month.",
         "Why is my bill higher than usual? It's {amount} pounds this time.",
         "There's a payment on my card I don't recognise from you.",
         "you took money from my account twice!!"],
        ["I'm sorry about that. I can see two payments for the {plan} plan; I've refunded the second one and "
         "it will be back in your account in 3 to 5 days.",
         "Your bill is higher because the introductory discount ended last month; the {plan} plan is now at "
         "its full price.",
         "Let me look into it. That payment of {amount} pounds is for the annual renewal of your {plan} plan.",
         "Apologies for the double charge. It was a fault in our payment system and it has been reversed."],
        ["Can I switch to a cheaper plan?", "Can I get a copy of the invoice?",
         "Will this happen again next month?"],
        ["Yes, the basic plan is 8 pounds a month; I can switch you from your next billing date.",
         "I've emailed you the invoice as a PDF.",
         "No, the fault has been fixed and your next payment will be taken once, as usual."]),
    "wifi_problem": (
        ["My internet keeps dropping out every evening.",
         "The wifi is really slow since {day}, is there an outage in {city}?",
         "My {product} won't connect to the wifi any more.",
         "no internet at all since this morning"],
        ["Sorry about that. There is a known outage in {city} and engineers expect to fix it by 6pm today.",
         "Please try restarting your router: unplug it for 30 seconds, then plug it back in and wait two "
         "minutes for the lights to turn green.",
         "I've run a line test and your connection looks fine from our side; could you try a cable instead of "
         "the wifi to see if the speed improves?",
         "Evening drops are often caused by interference; changing the wifi channel in the router settings "
         "usually fixes it."],
        ["I've already restarted it twice.", "How do I change the channel?",
         "Can you send an engineer?"],
        ["Thanks for trying that. I'll reset the line from our end, which can take up to ten minutes.",
         "Open 192.168.1.1 in your browser, log in with the details on the router's sticker and pick a "
         "channel under Wireless settings.",
         "Yes, I've booked an engineer for {day} between 8am and 1pm."]),
    "change_address": (
        ["I've moved house, how do I update my address?",
         "Can I change the delivery address for order {order}?",
         "I need to send my order to my work address in {city} instead."],
        ["You can update it under Account, then Addresses; new orders will go to the new address.",
         "Yes, the order hasn't been dispatched yet, so I've changed the delivery address for you.",
         "I'm afraid order {order} has already left the warehouse, so the address can't be changed, but you "
         "can redirect it from the courier's tracking page."],
        ["Will it cost extra?", "Can you confirm the new address?"],
        ["No, there's no charge for changing the address.",
         "Yes, it's now going to your {city} address; you'll get a confirmation email."]),
    "cancel_subscription": (
        ["I'd like to cancel my {plan} subscription.",
         "How do I stop my membership from renewing?",
         "Please cancel my account, I don't use it any more."],
        ["I'm sorry to see you go. I've cancelled your {plan} subscription; you keep access until the end of "
         "the current billing period.",
         "You can turn off automatic renewal under Account, then Subscription; your plan will then end on its "
         "renewal date.",
         "Before I cancel, would a month free on the basic plan help? If not, I can close the account now."],
        ["Will I get a refund for this month?", "Can I come back later and keep my data?"],
        ["Refunds aren't available for the current month, but you won't be charged again.",
         "Yes, we keep your data for 12 months, so you can reactivate at any time."]),
    "product_question": (
        ["Does the {product} come with a warranty?",
         "Is the {product} compatible with my phone?",
         "What's the battery life of the {product}?",
         "is the {product} in stock in {city}?"],
        ["Yes, every {product} comes with a two-year manufacturer's warranty, and you can extend it to five "
         "years at checkout.",
         "It works with any phone running Android 10 or iOS 15 and newer, over Bluetooth.",
         "The battery lasts about 12 hours of normal use and charges fully in 90 minutes.",
         "Our {city} store has three in stock; you can reserve one online and collect it today."],
        ["Does the warranty cover accidental damage?", "Can I order it online and return it in store?"],
        ["No, accidental damage needs our protection plan, which is 4 pounds a month.",
         "Yes, online orders can be returned to any of our stores within 30 days."]),
    "appointment": (
        ["I need to book an engineer visit for my {product}.",
         "Can I reschedule my appointment on {day}?",
         "The technician didn't turn up for my appointment today."],
        ["I can book an engineer for {day} morning or afternoon; which suits you better?",
         "Of course, I've moved your appointment; the next free slot is {day} between 1pm and 5pm.",
         "I'm very sorry the technician didn't arrive. I've booked the first slot tomorrow and added a 20 "
         "pound credit to your account."],
        ["Morning please.", "Will they call before they come?"],
        ["Done: the engineer will come on {day} between 8am and 12pm.",
         "Yes, the engineer will call you about 30 minutes before arriving."]),
    "damaged_item": (
        ["The {product} I received is broken, the screen is cracked.",
         "My order arrived damaged, the box was crushed.",
         "A part is missing from my {product}."],
        ["I'm so sorry it arrived damaged. Could you send a photo of the damage? Then I'll arrange a "
         "replacement straight away.",
         "Sorry about that. I've ordered a replacement {product}, which will be delivered by {day}; the courier "
         "will collect the damaged one at the same time.",
         "Apologies for the missing part. I've sent it out separately by first class post, free of charge."],
        ["I've sent the photo now.", "Do I need to keep the packaging?"],
        ["Thanks, I've got it and the replacement is on its way.",
         "Please keep it if you can, so the courier can take the damaged item back in it."]),
}

OPENINGS = ["Hi,", "Hello,", "Hi there,", "Good morning,", "", "", "", "Hey,"]
GREETINGS = ["Hi {name}, thanks for getting in touch.", "Hello {name}.", "", "", ""]
THANKS = ["Thanks, that's great.", "OK thank you.", "Thank you for your help!", "Perfect, thanks.", "cheers"]
GOODBYES = ["You're welcome! Is there anything else I can help with?", "Glad I could help. Have a nice day!",
            "No problem at all. Take care!", "You're welcome, {name}. Enjoy the rest of your day."]


@dataclass
class Dialogue:
    intent: str
    turns: list[tuple[str, str]]  # (sender, text), alternating user / agent, starting with the user


def _fill(template: str, rng: random.Random, slots: dict[str, str]) -> str:
    return template.format(**slots)


def _slots(rng: random.Random) -> dict[str, str]:
    return {"order": f"{rng.randint(10, 99)}-{rng.randint(100000, 999999)}", "product": rng.choice(PRODUCTS),
            "city": rng.choice(CITIES), "day": rng.choice(DAYS), "plan": rng.choice(PLANS),
            "amount": str(rng.randint(12, 95)), "name": rng.choice(NAMES)}


def dialogues(n: int, seed: int = 0) -> list[Dialogue]:
    """``n`` dialogues of 2 to 6 turns: an opening, the agent's reply, maybe a follow-up and its answer,
    maybe thanks and a goodbye. Intents cycle, so every intent has about n / len(INTENTS) dialogues."""
    rng = random.Random(seed)
    names = sorted(INTENTS)
    out = []
    for index in range(n):
        intent = names[index % len(names)]
        openings, replies, follow_ups, answers = INTENTS[intent]
        slots = _slots(rng)
        opening = f"{rng.choice(OPENINGS)} {_fill(rng.choice(openings), rng, slots)}".strip()
        greeting = _fill(rng.choice(GREETINGS), rng, slots)
        turns = [("user", opening), ("agent", f"{greeting} {_fill(rng.choice(replies), rng, slots)}".strip())]
        if rng.random() < 0.6:
            k = rng.randrange(len(follow_ups))
            turns += [("user", follow_ups[k]), ("agent", _fill(answers[k], rng, slots))]
        if rng.random() < 0.5:
            turns += [("user", rng.choice(THANKS)), ("agent", _fill(rng.choice(GOODBYES), rng, slots))]
        out.append(Dialogue(intent, turns))
    return out


def pool_pairs(dialogue_list: list[Dialogue]) -> list[dict[str, str]]:
    """Every (user utterance, agent reply) pair of the dialogues: a vBLEU pool."""
    return [{"utterance": dialogue.turns[k][1], "response": dialogue.turns[k + 1][1]}
            for dialogue in dialogue_list for k in range(0, len(dialogue.turns) - 1, 2)]


def other_wording(dialogue: Dialogue, rng: random.Random) -> str:
    """Another agent's reply to the same opening: same intent, another wording where there is one."""
    replies = INTENTS[dialogue.intent][1]
    slots = _slots(rng)
    choices = [reply for reply in replies if _fill(reply, rng, slots) != dialogue.turns[1][1]] or replies
    return _fill(rng.choice(choices), rng, slots)


def response_items(dialogue_list: list[Dialogue], seed: int = 0, prefix: str = "d",
                   alternatives: bool = True) -> list[dict]:
    """A response gold: for each dialogue, the context up to its opening utterance and references as a
    human-rated set looks: the true reply (weight 1), another agent's wording of a reply to the same
    intent (0.4 to 0.9, when it differs) and a reply to another intent (rated -0.2 to -0.8).
    ``alternatives=False``: the true reply alone, as a helpdesk log gives it."""
    rng = random.Random(seed)
    names = sorted(INTENTS)
    items = []
    for index, dialogue in enumerate(dialogue_list):
        references = [{"text": dialogue.turns[1][1], "weight": 1.0}]
        if not alternatives:
            items.append({"id": f"{prefix}{index}", "context": [{"sender": "user", "text": dialogue.turns[0][1]}],
                          "references": references})
            continue
        slots = _slots(rng)
        alternative = _fill(rng.choice(INTENTS[dialogue.intent][1]), rng, slots)
        if alternative != dialogue.turns[1][1]:
            references.append({"text": alternative, "weight": round(rng.uniform(0.4, 0.9), 2)})
        other = rng.choice([name for name in names if name != dialogue.intent])
        references.append({"text": _fill(rng.choice(INTENTS[other][1]), rng, slots),
                           "weight": -round(rng.uniform(0.2, 0.8), 2)})
        items.append({"id": f"{prefix}{index}", "context": [{"sender": "user", "text": dialogue.turns[0][1]}],
                      "references": references})
    return items
