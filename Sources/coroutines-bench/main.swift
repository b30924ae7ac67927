import Coroutines
print("bench placeholder")
