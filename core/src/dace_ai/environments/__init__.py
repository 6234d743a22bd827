"""environments"""
