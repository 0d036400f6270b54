"""The leak guard: detect, restore and attribute state a test leaves behind."""
