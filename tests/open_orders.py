"""The orders schema of the open-event tests across layers (broker processes, gateway):
open kinds, optional, nested and array fields in one type."""

ORDERS_SCHEMA = """\
[Order]
id = "int"
price = "float"
paid = "optional bool"
at = "optional timestamp"
client = "optional ip"
tags = "array<string>"
[Order.customer]
tier = "enum[BRONZE,SILVER,GOLD]"
name = "optional string"
"""
