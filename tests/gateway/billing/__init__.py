"""Billing: charges, holds, escrow and spend ceilings."""
