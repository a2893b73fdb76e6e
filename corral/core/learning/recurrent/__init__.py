"""Recurrent policies' bookkeeping: training rows cut into sequences, and the state carried from step to step while acting."""
